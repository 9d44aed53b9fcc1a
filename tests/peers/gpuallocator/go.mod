// Test tooling only: the peer check of troupe simulate's "besteffort" chooser
// (src/extender/simulate_choosers.c) runs NVIDIA's own best-effort policy
// from this exact release on the same cases (tests/peers/test_besteffort_peer.py).
module troupe.io/tests/peers/gpuallocator

go 1.26.0

require github.com/NVIDIA/go-gpuallocator v0.6.0

require (
	github.com/NVIDIA/go-nvlib v0.7.3 // indirect
	github.com/NVIDIA/go-nvml v0.12.9-0 // indirect
	github.com/google/uuid v1.6.0 // indirect
)
