// kubelet-standin: the tests' kubelet stand-in (package kubelet) as a program.
//
//	kubelet-standin verdicts < in.json
//
// reads {"node": <v1.Node>, "devices": {"example.com/gpu": 4}, "pods": [<v1.Pod>...]}, admits the
// pods in order with upstream's admission code (each admitted pod joins the node), and prints
// [{"name", "admit", "reason", "message"}] in input order.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"

	"fitledger.test/upstream/suite/kubelet"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "verdicts" {
		fmt.Fprintln(os.Stderr, "usage: kubelet-standin verdicts < {node, devices, pods} JSON")
		os.Exit(2)
	}
	var in struct {
		Node    *corev1.Node                  `json:"node"`
		Devices map[corev1.ResourceName]int64 `json:"devices"`
		Pods    []*corev1.Pod                 `json:"pods"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-standin: bad input: %v\n", err)
		os.Exit(2)
	}
	if in.Node == nil {
		fmt.Fprintln(os.Stderr, "kubelet-standin: bad input: no node")
		os.Exit(2)
	}
	out, _ := json.Marshal(kubelet.Verdicts(in.Node, in.Devices, in.Pods))
	fmt.Println(string(out))
}
