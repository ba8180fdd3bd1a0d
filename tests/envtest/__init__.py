"""An envtest-style real Kubernetes control plane for tests.

etcd, kube-apiserver and kube-controller-manager, shared by a whole test run (``plugin.py``).
"""
