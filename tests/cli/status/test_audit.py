"""``snapready status``: the pods and templates a policy selects that admission never judged.

On the real API server (issue 33): pods created next to snapready rather than through it (as
admin, the way they exist when snapready was installed after them, or was down under
``failurePolicy: Ignore``), one of which admission would deny (no gVisor runtime class); a
stamped pod; a finished one; and a Deployment created before the policy that selects it. The
command counts them with the leader's functions, whether or not reports are written.
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from tests.cli.test_status_explain import Scenario, snapready, status_json
from tests.cli.test_status_explain import scenario as scenario  # noqa: PLC0414 - the fixture
from tests.support import kube_raw
from tests.support.kube_real import create_policy, policy


def created(env: Scenario, obj: dict[str, Any]) -> dict[str, Any]:
    reply = kube_raw.create(env.api, obj, namespace=env.namespace)
    assert reply.ok, reply.body
    return reply.body


def deployment(name: str, template: dict[str, Any]) -> dict[str, Any]:
    labels = template["metadata"]["labels"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
        },
    }


def block(report: dict[str, Any], name: str) -> dict[str, Any]:
    (entry,) = [p for p in report["policies"] if p["name"] == name]
    return dict(entry["audit"])


def test_status_counts_what_admission_never_judged(scenario: Scenario) -> None:
    env = scenario
    env.create(env.pod("stamped"))
    created(env, env.pod("early-ok"))
    bad = env.pod("early-bad")
    del bad["spec"]["runtimeClassName"]  # gvisor-runtime: admission would deny it
    created(env, bad)
    done = created(env, env.pod("done", model="m9"))
    client.CoreV1Api(env.api).patch_namespaced_pod_status(
        done["metadata"]["name"], env.namespace, {"status": {"phase": "Succeeded"}}
    )
    late = env.pod("late-template")
    late["metadata"]["labels"] = {"app": "late"}
    del late["spec"]["runtimeClassName"]
    created(env, deployment("late-app", late))
    created(env, deployment("llm-app", env.pod("llm-template")))  # after its policy: judged
    time.sleep(1.1)  # creation times have seconds: the policy comes a second later
    create_policy(env.api, policy("late-policy", env.namespace, {"app": "late"}))

    report = status_json(env)
    assert block(report, "llm-policy") == {
        "pods": {"neverJudged": 2, "wouldDeny": 1},
        "workloads": {"neverJudged": 0, "wouldDeny": 0},
    }
    assert block(report, "late-policy") == {
        "pods": {"neverJudged": 0, "wouldDeny": 0},
        "workloads": {"neverJudged": 1, "wouldDeny": 1},
    }
    text = snapready("status", "--kubeconfig", str(env.kubeconfig), "-n", env.namespace)
    assert text.returncode == 0, text.stderr
    assert "audit      2 running pods were never judged; 1 would be denied" in text.stdout
    assert "1 workload template(s) never judged" in text.stdout
