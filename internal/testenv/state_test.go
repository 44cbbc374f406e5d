package testenv

import (
	"bytes"
	"compress/gzip"
	"testing"
)

func TestReadState(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(`{"serial":3,"lineage":"L","resources":[{"type":"terraform_data","name":"this","instances":[{"attributes":{"id":"abc"}}]}]}`))
	_ = zw.Close()
	st, err := ReadState(map[string][]byte{"tfstate": b.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	if st.Serial != 3 || st.Lineage != "L" || len(st.Resources) != 1 || st.Resources[0].Name != "this" || st.Resources[0].Instances[0].Attributes.ID != "abc" {
		t.Errorf("ReadState = %+v", st)
	}
	if _, err := ReadState(map[string][]byte{"tfstate": []byte(`{"serial":1}`)}); err == nil {
		t.Error("a state that is not gzip'd was read")
	}
}
