package outputs

import v1alpha1 "github.com/landform-dev/landform/api/v1alpha1"

// Row is one output as a person reads it: the Secret key it is written
// under and its value, or a note saying why no value is shown.
type Row struct {
	Name      string `json:"name"`
	Key       string `json:"key,omitempty"`
	Sensitive bool   `json:"sensitive"`
	Value     string `json:"value,omitempty"`
	// Note says why there is no value.
	Note string `json:"note,omitempty"`
}

// View is what the CLI's `outputs` and the UI show of an object's
// outputs.
type View struct {
	Spec *v1alpha1.WriteOutputsToSecretSpec
	// Names are the outputs the object has (status.availableOutputs).
	Names []string
	// Data is the outputs Secret's; Absent when it is not written yet.
	Data   map[string][]byte
	Absent bool
	// Sensitive says which outputs are; a value it holds back is noted
	// Hidden instead, unless Show.
	Sensitive func(name string) bool
	Hidden    string
	Show      bool
}

// Rows lists every output under every key it is written to, in Names'
// order.
func (v View) Rows() []Row {
	keys := Keys(v.Spec, v.Names)
	var rows []Row
	for _, n := range v.Names {
		ks := keys[n]
		if len(ks) == 0 {
			ks = []string{""}
		}
		for _, k := range ks {
			r := Row{Name: n, Key: k, Sensitive: v.Sensitive(n)}
			value, written := v.Data[k]
			switch {
			case v.Spec == nil:
				r.Note = "(not written: no spec.writeOutputsToSecret)"
			case k == "":
				r.Note = "(not selected in spec.writeOutputsToSecret.outputs)"
			case v.Absent:
				r.Note = "(Secret " + v.Spec.Name + " not written yet)"
			case !written:
				r.Note = "(not in Secret " + v.Spec.Name + " yet)"
			case r.Sensitive && !v.Show:
				r.Note = v.Hidden
			default:
				r.Value = string(value)
			}
			rows = append(rows, r)
		}
	}
	return rows
}
