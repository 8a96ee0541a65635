"""Memory transfer: comparing benches run with different imported memories."""
