"""The audit controller: the leader judges existing objects and writes their policy reports.

``worker`` is the controller (``AuditWorker``, a ``Reconciler``); ``passes`` judges what one
namespace pass lists, ``queue`` holds the stamped pods judged between passes, ``reports`` is the
report writer (with its own report cache).
"""
