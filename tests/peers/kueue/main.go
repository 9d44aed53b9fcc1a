// check_kueue's Go half: reads cases (one JSON object a line: the nodes as
// Kubernetes Node objects, the topology levels, the GPUs per pod, the pod
// count, whether the request is unconstrained, and troupe's plan as pods per
// node, or null), runs
// Kueue v0.17.0's own TAS assignment on each (TroupePeerAssign, the overlay
// file in Kueue's package), and says where the two differ. Exit 0 when every
// case agrees, 1 when one does not, 2 on bad input.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
)

type tcase struct {
	Levels        []string         `json:"levels"`
	K             int64            `json:"k"`
	Count         int32            `json:"count"`
	Unconstrained bool             `json:"unconstrained"`
	Nodes         []corev1.Node    `json:"nodes"`
	Ours          map[string]int32 `json:"ours"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	n, bad := 0, 0
	for in.Scan() {
		var c tcase
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fmt.Fprintf(os.Stderr, "check_kueue: case %d: %v\n", n, err)
			os.Exit(2)
		}
		req := resources.Requests{corev1.ResourceName("nvidia.com/gpu"): c.K}
		got, why := scheduler.TroupePeerAssign(c.Nodes, c.Levels, req, c.Count,
			c.Levels[max(len(c.Levels)-2, 0)], c.Unconstrained)
		if got == nil && c.Ours != nil || got != nil && !reflect.DeepEqual(got, c.Ours) {
			bad++
			fmt.Printf("case %d (%d pods x %d GPUs over %d nodes): kueue %v (%s), troupe's model %v\n",
				n, c.Count, c.K, len(c.Nodes), got, why, c.Ours)
		}
		n++
	}
	fmt.Printf("check_kueue: %d cases, %d differ\n", n, bad)
	if bad > 0 {
		os.Exit(1)
	}
}
