"""What several ``snapready`` commands use; no command imports another (``pyproject.toml``
``[tool.importlinter]``: the commands are independent, all above this package).

- ``options``: ``--config``/``--policies`` and the settings they give.
- ``output``: the JSON printer, the ``snapready: ...`` error line, kubectl-like ages.
- ``inputs``: the files named on the command line, or stdin for ``-`` (``check``, ``hash``,
  ``diff``, ``review``); parsing them is ``kube.manifests``, pure.
- ``cluster_command``: the frame of the commands that read the cluster (``status``,
  ``explain``): flags, connection, read through ``cluster.api.snapshot_reader``, output.
- ``entries``: what ``status`` and ``explain`` both report: a pod's judged outcome, a
  checkpoint awaiting or failed.
- ``fingerprints``: what ``hash`` and ``diff`` share: injection and ``--ordinal`` flags, one
  fingerprinted pod view as JSON, a problem line.
"""
