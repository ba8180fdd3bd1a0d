"""The restore-outcomes controller: outcomes from GKE's evidence, their Events, the readiness gate.

``tracker`` is the controller (``RestoreTracker``, a ``Reconciler``); ``gate`` the readiness
gate's condition, ``labels`` the repair of a pending pod that lost its selected label. Checkpoint
reports and stale-snapshot warnings are controllers of their own (``controllers.checkpoints``,
``controllers.snapshot_warnings``).
"""
