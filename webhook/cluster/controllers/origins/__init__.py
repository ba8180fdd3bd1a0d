"""The origin-records controller: one SnapshotRecord per PodSnapshot, written by the leader.

``recorder`` is the controller (``OriginRecorder``, a ``Reconciler``); ``build`` the pure record
building it uses; ``consumed`` reads the metadata of the configuration the origin pod consumed.
A folder of its own so that the independence contract between controllers (``pyproject.toml``)
names the controller, not its helpers.
"""
