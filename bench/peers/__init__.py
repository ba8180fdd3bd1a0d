"""Peer webhooks of ``make bench-cluster``: other frameworks doing only the minimal work.

Design.md "Targets" wants snapready's webhook CPU per selected pod below what a Go
controller-runtime webhook pays for only the gVisor check and a spec hash, in the same run. The
peers are those webhooks, written as each framework's users write them:

* ``go/``: a controller-runtime ``webhook.Server`` with two ``admission.Handler``\\ s (the typed
  Pod decoded by ``admission.Decoder``, the patch by ``admission.PatchResponseFromRaw``); built
  once by ``scripts/peers.sh`` from the pinned ``go.mod``/``go.sum``;
* ``kopf_peer``: ``@kopf.on.mutate`` and ``@kopf.on.validate`` served by ``kopf.WebhookServer``
  and run by kopf's CLI.

Both: ``/mutate`` stamps ``snapready.io/spec-hash: peer:sha256:<hex>`` on a gVisor pod
(``spec.runtimeClassName == "gvisor"``, snapready's ``gvisor-runtime`` rule with its default
names), SHA-256 of a JSON encoding of the same fields (each container's name, image, command,
args, env, ports and resources; a dozen pod-spec fields: runtime class, node selector, host
namespaces, security context, DNS, OS, user namespace, token automount); ``/validate`` denies a
pod CREATE that is not gVisor. Each counts its calls; ``bench.harness.peers`` builds, starts,
waits for and reads them. Nothing here imports the harness or snapready: they are programs.
"""
