// kstatus prints what the kstatus library (sigs.k8s.io/cli-utils/pkg/kstatus/status, the library Flux's
// health checks and `flux` waits use) computes for each object of a Kubernetes List read from stdin, as
// `kubectl get -o json` writes it: one JSON line per object with its kind, name, status and message.
//
//	kubectl get profileruns -o json | kstatus
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type computed struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading stdin: %v", err)
	}
	var list unstructured.UnstructuredList // decodes numbers as int64, as the library reads them
	if err := list.UnmarshalJSON(input); err != nil {
		fail("stdin is not a Kubernetes List: %v", err)
	}
	out := json.NewEncoder(os.Stdout)
	for i := range list.Items {
		object := &list.Items[i]
		result, err := status.Compute(object)
		if err != nil {
			fail("%s %s: %v", object.GetKind(), object.GetName(), err)
		}
		line := computed{object.GetKind(), object.GetName(), string(result.Status), result.Message}
		if err := out.Encode(line); err != nil {
			fail("writing stdout: %v", err)
		}
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kstatus: "+format+"\n", args...)
	os.Exit(1)
}
