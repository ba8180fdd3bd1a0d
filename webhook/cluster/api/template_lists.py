"""The workload collections whose pod templates the leader lists on demand (never watched).

Read per namespace by the snapshot lifecycle (``unused`` prune rule) and the audit (workload
templates), and by ``snapready status`` for the same answer: one paginated list per kind. No
watch of workloads: webhook CPU and memory at bench scale must not grow with them.
"""

from __future__ import annotations

TEMPLATE_LISTS = (
    ("apps/v1", "Deployment", "deployments"),
    ("apps/v1", "StatefulSet", "statefulsets"),
    ("apps/v1", "DaemonSet", "daemonsets"),
    ("batch/v1", "Job", "jobs"),
    ("batch/v1", "CronJob", "cronjobs"),
)
"""``(apiVersion, kind, resource)`` listed per candidate namespace
(``snapshots.usage.LISTED_KINDS``)."""
