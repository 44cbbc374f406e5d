// Command apidocs writes docs/api.md, the reference of the Terraform API,
// from the generated CRD (descriptions, validations and defaults, as the
// API server enforces them) and the Go types of api/v1alpha1 (type names,
// and where a field is a Kubernetes type documented elsewhere). `make
// generate` runs it, so the reference cannot drift from the code.
//
//	go run ./hack/apidocs -crd config/crd/bases/infra.landform.dev_terraforms.yaml -types api/v1alpha1 -out docs/api.md
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	crdPath := flag.String("crd", "config/crd/bases/infra.landform.dev_terraforms.yaml", "the generated CRD")
	typesDir := flag.String("types", "api/v1alpha1", "the Go package of the API types")
	out := flag.String("out", "docs/api.md", "the Markdown file to write")
	flag.Parse()
	if err := run(*crdPath, *typesDir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}

func run(crdPath, typesDir, out string) error {
	b, err := os.ReadFile(crdPath)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		return fmt.Errorf("%s: %w", crdPath, err)
	}
	types, err := parseTypes(typesDir)
	if err != nil {
		return err
	}
	doc, err := render(&crd, types)
	if err != nil {
		return err
	}
	return os.WriteFile(out, doc, 0o644)
}

// goField is one field of a Go struct of the API.
type goField struct {
	json   string // the JSON name; empty for an inlined field
	goType string // as written in the source: []Variable, *metav1.Duration
	local  string // the API's own struct the field holds, if any
}

// goStruct is one struct of the API: its doc comment and fields in order.
type goStruct struct {
	doc    string
	fields []goField
}

// parseTypes reads the structs of the API package, in field order.
func parseTypes(dir string) (map[string]goStruct, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go") && !strings.HasPrefix(fi.Name(), "zz_generated")
	}, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	structs := map[string]*ast.StructType{}
	docs := map[string]string{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, spec := range gd.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					structs[ts.Name.Name] = st
					doc := ts.Doc
					if doc == nil {
						doc = gd.Doc
					}
					docs[ts.Name.Name] = docText(doc)
				}
			}
		}
	}
	types := map[string]goStruct{}
	for name, st := range structs {
		var fields []goField
		for _, f := range st.Fields.List {
			var buf bytes.Buffer
			writeExpr(&buf, f.Type)
			gf := goField{goType: buf.String()}
			if base := baseIdent(f.Type); base != "" {
				if _, ok := structs[base]; ok {
					gf.local = base
				}
			}
			if f.Tag != nil {
				tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
				gf.json, _, _ = strings.Cut(tag, ",")
			}
			fields = append(fields, gf)
		}
		types[name] = goStruct{doc: docs[name], fields: fields}
	}
	return types, nil
}

// docText is a doc comment without its markers (+kubebuilder:...).
func docText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(g.Text(), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "+") {
			lines = append(lines, l)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func writeExpr(buf *bytes.Buffer, e ast.Expr) {
	switch t := e.(type) {
	case *ast.Ident:
		buf.WriteString(t.Name)
	case *ast.StarExpr:
		buf.WriteString("*")
		writeExpr(buf, t.X)
	case *ast.ArrayType:
		buf.WriteString("[]")
		writeExpr(buf, t.Elt)
	case *ast.MapType:
		buf.WriteString("map[")
		writeExpr(buf, t.Key)
		buf.WriteString("]")
		writeExpr(buf, t.Value)
	case *ast.SelectorExpr:
		writeExpr(buf, t.X)
		buf.WriteString(".")
		buf.WriteString(t.Sel.Name)
	default:
		fmt.Fprintf(buf, "%T", e)
	}
}

// baseIdent is the local type name under pointers and slices.
func baseIdent(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return baseIdent(t.X)
	case *ast.ArrayType:
		return baseIdent(t.Elt)
	}
	return ""
}

// section is one struct of the API with its schema.
type section struct {
	name   string
	schema *apiextensionsv1.JSONSchemaProps
}

func render(crd *apiextensionsv1.CustomResourceDefinition, types map[string]goStruct) ([]byte, error) {
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		return nil, fmt.Errorf("expected one version with a schema in CRD %s", crd.Name)
	}
	version := crd.Spec.Versions[0]
	root := version.Schema.OpenAPIV3Schema
	var w bytes.Buffer
	fmt.Fprintf(&w, "# API reference: `%s/%s` `%s`\n\n", crd.Spec.Group, version.Name, crd.Spec.Names.Kind)
	fmt.Fprintf(&w, "<!-- Generated by hack/apidocs from %s and the Go types of api/%s (`make generate`). Do not edit. -->\n\n",
		"config/crd/bases/"+crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml", version.Name)
	fmt.Fprintf(&w, "Every field of the `%s` API: its Go type, what it means, how the API server validates it and what it defaults to. "+
		"Validation and defaults are the CRD's own (the API server applies them); `required` fields must be set. "+
		"Kubernetes types (`corev1.*`, `metav1.*`) are those of the Kubernetes API reference. "+
		"The README shows the API [by example](../README.md#the-api-by-example).\n\n",
		crd.Spec.Names.Kind)
	fmt.Fprintf(&w, "Resource `%s.%s`, namespaced, short name %s. `kubectl get` columns: %s.\n\n",
		crd.Spec.Names.Plural, crd.Spec.Group, codes(crd.Spec.Names.ShortNames), columns(version.AdditionalPrinterColumns))

	queue := []section{{name: crd.Spec.Names.Kind, schema: root}}
	seen := map[string]bool{crd.Spec.Names.Kind: true}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		st, ok := types[s.name]
		if !ok {
			return nil, fmt.Errorf("no Go type %s in the API package", s.name)
		}
		fields := st.fields
		fmt.Fprintf(&w, "## %s\n\n", s.name)
		if st.doc != "" {
			fmt.Fprintf(&w, "%s\n\n", paragraph(st.doc))
		}
		for _, v := range s.schema.XValidations {
			fmt.Fprintf(&w, "Rule: %s (`%s`).\n\n", escape(v.Message), v.Rule)
		}
		w.WriteString("| field | type | description | validation | default |\n|---|---|---|---|---|\n")
		covered := map[string]bool{}
		for _, f := range fields {
			if f.json != "" && f.json != "-" {
				covered[f.json] = true
			}
		}
		var uncovered []string
		for name := range s.schema.Properties {
			if !covered[name] {
				uncovered = append(uncovered, name)
			}
		}
		sort.Strings(uncovered)
		row := func(name, goType, local string) error {
			prop, ok := s.schema.Properties[name]
			if !ok {
				return fmt.Errorf("%s.%s is in the Go types but not in the CRD: run make generate", s.name, name)
			}
			typ := code(goType)
			if local != "" {
				typ = fmt.Sprintf("[%s](#%s)", code(goType), strings.ToLower(local))
				if !seen[local] {
					seen[local] = true
					queue = append(queue, section{name: local, schema: objectSchema(&prop)})
				}
			}
			desc := prop.Description
			if desc == "" && goType == "metav1.ObjectMeta" {
				desc = "Kubernetes object metadata: name, namespace, labels, annotations, ..."
			}
			fmt.Fprintf(&w, "| `%s` | %s | %s | %s | %s |\n", name, typ, cell(desc), validation(s.schema, name, &prop), defaultOf(&prop))
			return nil
		}
		for _, f := range fields {
			if f.json == "" {
				// Inlined (TypeMeta, ObjectMeta): the properties it adds.
				for _, name := range uncovered {
					typ := s.schema.Properties[name].Type
					if name == "metadata" {
						typ = "metav1.ObjectMeta"
					}
					if err := row(name, typ, ""); err != nil {
						return nil, err
					}
				}
				uncovered = nil
				continue
			}
			if f.json == "-" {
				continue
			}
			if err := row(f.json, f.goType, f.local); err != nil {
				return nil, err
			}
		}
		for _, name := range uncovered {
			return nil, fmt.Errorf("%s.%s is in the CRD but not in the Go types", s.name, name)
		}
		w.WriteString("\n")
	}
	return w.Bytes(), nil
}

// objectSchema is the schema of the struct a field holds (its items for a list).
func objectSchema(p *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if p.Type == "array" && p.Items != nil && p.Items.Schema != nil {
		return p.Items.Schema
	}
	return p
}

func validation(parent *apiextensionsv1.JSONSchemaProps, name string, p *apiextensionsv1.JSONSchemaProps) string {
	var v []string
	for _, r := range parent.Required {
		if r == name {
			v = append(v, "required")
		}
	}
	add := func(p *apiextensionsv1.JSONSchemaProps, prefix string) {
		if len(p.Enum) > 0 {
			var vals []string
			for _, e := range p.Enum {
				vals = append(vals, code(strings.Trim(string(e.Raw), `"`)))
			}
			v = append(v, prefix+"one of "+strings.Join(vals, ", "))
		}
		if p.Pattern != "" {
			v = append(v, prefix+"pattern "+code(p.Pattern))
		}
		if p.Format != "" {
			v = append(v, prefix+"format "+p.Format)
		}
		if p.MinLength != nil && *p.MinLength == 1 {
			v = append(v, prefix+"not empty")
		} else if p.MinLength != nil {
			v = append(v, fmt.Sprintf("%sat least %d characters", prefix, *p.MinLength))
		}
		if p.MaxLength != nil {
			v = append(v, fmt.Sprintf("%sat most %d characters", prefix, *p.MaxLength))
		}
		if p.Minimum != nil {
			v = append(v, fmt.Sprintf("%sminimum %v", prefix, *p.Minimum))
		}
		if p.Maximum != nil {
			v = append(v, fmt.Sprintf("%smaximum %v", prefix, *p.Maximum))
		}
		for _, x := range p.XValidations {
			v = append(v, fmt.Sprintf("%s%s (%s)", prefix, escape(x.Message), code(x.Rule)))
		}
	}
	add(p, "")
	if p.MinItems != nil {
		v = append(v, fmt.Sprintf("at least %d items", *p.MinItems))
	}
	if p.MaxItems != nil {
		v = append(v, fmt.Sprintf("at most %d items", *p.MaxItems))
	}
	if p.XListType != nil && *p.XListType == "map" && len(p.XListMapKeys) > 0 {
		v = append(v, "items unique by "+codes(p.XListMapKeys))
	}
	if p.Type == "array" && p.Items != nil && p.Items.Schema != nil && p.Items.Schema.Type != "object" {
		add(p.Items.Schema, "each item: ")
	}
	if p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
		add(p.AdditionalProperties.Schema, "each value: ")
	}
	if p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields {
		v = append(v, "any JSON value")
	}
	return strings.Join(v, "; ")
}

func defaultOf(p *apiextensionsv1.JSONSchemaProps) string {
	if p.Default == nil {
		return ""
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, p.Default.Raw); err != nil {
		return code(string(p.Default.Raw))
	}
	s := compact.String()
	if strings.HasPrefix(s, `"`) {
		s = strings.Trim(s, `"`)
	}
	return code(s)
}

func columns(cols []apiextensionsv1.CustomResourceColumnDefinition) string {
	var names []string
	for _, c := range cols {
		names = append(names, fmt.Sprintf("%s (%s)", c.Name, code(c.JSONPath)))
	}
	return strings.Join(names, ", ")
}

// paragraph joins a description's lines into one Markdown paragraph.
func paragraph(s string) string {
	return escape(strings.Join(strings.Fields(s), " "))
}

// cell is a description fit for one table cell.
func cell(s string) string {
	return strings.ReplaceAll(paragraph(s), "|", `\|`)
}

// escape keeps <placeholder> words visible in Markdown.
func escape(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}

// codes is each of ss as inline code, comma-separated.
func codes(ss []string) string {
	var out []string
	for _, s := range ss {
		out = append(out, code(s))
	}
	return strings.Join(out, ", ")
}

// code is s as inline code, whatever backticks it holds.
func code(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}
