package server

import "testing"

func TestCheckModulePath(t *testing.T) {
	for path, ok := range map[string]bool{
		"":                  true,
		".":                 true,
		"basic":             true,
		"./modules/app":     true,
		"modules/../basic":  true,
		"..":                false,
		"../x":              false,
		"a/../../x":         false,
		"/etc":              false,
		"modules/../../etc": false,
	} {
		err := checkModulePath(path)
		if (err == nil) != ok {
			t.Errorf("path %q: error %v, want ok=%v", path, err, ok)
		}
	}
}
