// argocd-health runs Kaliper's Argo CD health checks (Lua, in Argo CD's resource_customizations layout) with
// Argo CD's own Lua runtime (github.com/argoproj/argo-cd/v3/util/lua), as Argo CD runs a health check set in
// argocd-cm's resource.customizations (standard libraries off).
//
//	argocd-health test DIR   # every case of DIR/<group>/<Kind>/health_test.yaml; exit 1 on any mismatch
//	argocd-health live DIR   # a Kubernetes List on stdin: one JSON line per object with its health
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

type healthTests struct {
	Tests []struct {
		InputPath    string `json:"inputPath"`
		HealthStatus struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"healthStatus"`
	} `json:"tests"`
}

type health struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "test" && os.Args[1] != "live") {
		fail("usage: argocd-health test|live DIR")
	}
	overrides := loadChecks(os.Args[2])
	if os.Args[1] == "test" {
		os.Exit(runTests(os.Args[2], overrides))
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading stdin: %v", err)
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(input); err != nil {
		fail("stdin is not a Kubernetes List: %v", err)
	}
	out := json.NewEncoder(os.Stdout)
	for i := range list.Items {
		object := &list.Items[i]
		status, message := assess(overrides, object)
		if err := out.Encode(health{object.GetKind(), object.GetName(), status, message}); err != nil {
			fail("writing stdout: %v", err)
		}
	}
}

// loadChecks reads DIR/<group>/<Kind>/health.lua into the overrides argocd-cm's
// resource.customizations.health.<group>_<Kind> keys make.
func loadChecks(dir string) lua.ResourceHealthOverrides {
	scripts, err := filepath.Glob(filepath.Join(dir, "*", "*", "health.lua"))
	if err != nil || len(scripts) == 0 {
		fail("no <group>/<Kind>/health.lua under %s", dir)
	}
	overrides := lua.ResourceHealthOverrides{}
	for _, path := range scripts {
		script, err := os.ReadFile(path)
		if err != nil {
			fail("%v", err)
		}
		kindDir := filepath.Dir(path)
		key := filepath.Base(filepath.Dir(kindDir)) + "/" + filepath.Base(kindDir)
		overrides[key] = v1alpha1.ResourceOverride{HealthLua: string(script)}
	}
	return overrides
}

func assess(overrides lua.ResourceHealthOverrides, object *unstructured.Unstructured) (string, string) {
	result, err := overrides.GetResourceHealth(object)
	if err != nil {
		fail("%s %s: %v", object.GetKind(), object.GetName(), err)
	}
	if result == nil {
		fail("%s %s: no health check for %s", object.GetKind(), object.GetName(), object.GroupVersionKind())
	}
	return string(result.Status), result.Message
}

func runTests(dir string, overrides lua.ResourceHealthOverrides) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*", "health_test.yaml"))
	failed, passed := 0, 0
	for _, file := range files {
		var tests healthTests
		text, err := os.ReadFile(file)
		if err == nil {
			err = yaml.Unmarshal(text, &tests)
		}
		if err != nil {
			fail("%s: %v", file, err)
		}
		for _, test := range tests.Tests {
			input, err := os.ReadFile(filepath.Join(filepath.Dir(file), test.InputPath))
			if err != nil {
				fail("%s: %v", file, err)
			}
			object := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(input, &object.Object); err != nil {
				fail("%s: %v", test.InputPath, err)
			}
			status, message := assess(overrides, object)
			want := test.HealthStatus
			if status != want.Status || message != want.Message {
				failed++
				fmt.Printf("FAIL %s %s: got %s %q, want %s %q\n", file, test.InputPath, status, message, want.Status, want.Message)
			} else {
				passed++
			}
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 || passed == 0 {
		return 1
	}
	return 0
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "argocd-health: "+format+"\n", args...)
	os.Exit(2)
}
