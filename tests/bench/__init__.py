"""Tests of the benchmark harness's pure parts (``bench/``): no server, no control plane."""
