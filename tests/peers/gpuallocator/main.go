// gpuallocator-peer: the answers of NVIDIA's go-gpuallocator best-effort policy
// (gpuallocator.NewBestEffortPolicy, the policy k8s-device-plugin's
// GetPreferredAllocation uses) for test cases given as JSON, so that
// tests/peers/test_besteffort_peer.py can compare troupe simulate's C port
// (choose_besteffort in src/extender/simulate_choosers.c) with the real code.
//
//	gpuallocator-peer < cases.json
//
// Input: a JSON array of cases, each
//
//	{"links": [["X","NV2",...],...], "numa": [0,0,...], "free": [0,2,...], "k": 2}
//
// with links in troupe's names (the cells of `nvidia-smi topo -m`), numa the
// NUMA node of each device (-1 unknown), free the available device indices
// and k the count. Output: one line per case, the devices the policy returns
// in the order it returns them, "-" for a padding slot (a nil *Device: the
// policy can return one, see the C port's comment), "none" for an empty set.
//
// The Devices are built with their Links directly, as go-gpuallocator's own
// tests do, so no NVML is needed. The link types live in the module's
// internal/links package, which cannot be imported from outside; the Type
// field of P2PLink is exported, so it is set by value through reflect with the
// constants' values (links.P2PLinkType is an iota list, internal/links/device.go
// of v0.6.0: Unknown 0, CrossCPU 1, SameCPU 2, HostBridge 3, MultiSwitch 4,
// SingleSwitch 5, SameBoard 6, SingleNVLINKLink 7 ... EighteenNVLINKLinks 24).
//
// The mapping from troupe's names is the C port's, written out again here:
// SYS -> CrossCPU, NODE -> SameCPU, PHB -> HostBridge, PXB -> MultiSwitch,
// PIX -> SingleSwitch; NV<n> -> the n-link NVLink type (n capped at 18) plus, as NVML always
// reports a PCIe common ancestor too, CrossCPU when the two devices' NUMA
// nodes differ and SameCPU when they are the same (nothing when unknown).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-gpuallocator/gpuallocator"
)

// The values of go-gpuallocator's internal links.P2PLinkType constants.
const (
	linkCrossCPU     = 1
	linkSameCPU      = 2
	linkHostBridge   = 3
	linkMultiSwitch  = 4
	linkSingleSwitch = 5
	linkNVLink1      = 7 // SingleNVLINKLink; n links is linkNVLink1 + n - 1
	maxNVLinks       = 18
)

type testCase struct {
	Links [][]string `json:"links"`
	Numa  []int      `json:"numa"`
	Free  []int      `json:"free"`
	K     int        `json:"k"`
}

// linkTypes: the go-gpuallocator link types of one matrix cell.
func linkTypes(cell string, numaA, numaB int) ([]uint64, error) {
	switch cell {
	case "SYS", "SOC":
		return []uint64{linkCrossCPU}, nil
	case "NODE":
		return []uint64{linkSameCPU}, nil
	case "PHB":
		return []uint64{linkHostBridge}, nil
	case "PXB":
		return []uint64{linkMultiSwitch}, nil
	case "PIX":
		return []uint64{linkSingleSwitch}, nil
	}
	if !strings.HasPrefix(cell, "NV") {
		return nil, fmt.Errorf("unknown link %q", cell)
	}
	n, err := strconv.Atoi(cell[2:])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("unknown link %q", cell)
	}
	// GetNVLink counts up to EighteenNVLINKLinks and stays there.
	if n > maxNVLinks {
		n = maxNVLinks
	}
	var out []uint64
	switch {
	case numaA < 0 || numaB < 0:
	case numaA != numaB:
		out = append(out, linkCrossCPU)
	default:
		out = append(out, linkSameCPU)
	}
	return append(out, uint64(linkNVLink1+n-1)), nil
}

func newLink(gpu *gpuallocator.Device, t uint64) gpuallocator.P2PLink {
	l := gpuallocator.P2PLink{GPU: gpu}
	reflect.ValueOf(&l).Elem().FieldByName("Type").SetUint(t)
	return l
}

func devices(c *testCase) ([]*gpuallocator.Device, error) {
	n := len(c.Links)
	if len(c.Numa) != n {
		return nil, fmt.Errorf("%d rows of links but %d numa entries", n, len(c.Numa))
	}
	devs := make([]*gpuallocator.Device, n)
	for i := range devs {
		devs[i] = &gpuallocator.Device{Index: i, Links: map[int][]gpuallocator.P2PLink{}}
	}
	for i := 0; i < n; i++ {
		if len(c.Links[i]) != n {
			return nil, fmt.Errorf("row %d has %d cells, want %d", i, len(c.Links[i]), n)
		}
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			types, err := linkTypes(c.Links[i][j], c.Numa[i], c.Numa[j])
			if err != nil {
				return nil, fmt.Errorf("links[%d][%d]: %v", i, j, err)
			}
			for _, t := range types {
				devs[i].Links[j] = append(devs[i].Links[j], newLink(devs[j], t))
			}
		}
	}
	return devs, nil
}

func main() {
	var cases []testCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintf(os.Stderr, "gpuallocator-peer: reading the cases: %v\n", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	policy := gpuallocator.NewBestEffortPolicy()
	for ci := range cases {
		c := &cases[ci]
		devs, err := devices(c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gpuallocator-peer: case %d: %v\n", ci, err)
			os.Exit(2)
		}
		// The Allocator passes its remaining devices sorted by index
		// (DeviceSet.SortedSlice); the cases list them so.
		var available []*gpuallocator.Device
		for _, f := range c.Free {
			if f < 0 || f >= len(devs) {
				fmt.Fprintf(os.Stderr, "gpuallocator-peer: case %d: free device %d out of range\n", ci, f)
				os.Exit(2)
			}
			available = append(available, devs[f])
		}
		set := policy.Allocate(available, nil, c.K)
		if len(set) == 0 {
			fmt.Fprintln(out, "none")
			continue
		}
		words := make([]string, len(set))
		for i, d := range set {
			if d == nil {
				words[i] = "-"
			} else {
				words[i] = strconv.Itoa(d.Index)
			}
		}
		fmt.Fprintln(out, strings.Join(words, " "))
	}
}
