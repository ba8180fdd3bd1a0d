"""Pod templates inside custom resources, and the labels controllers add to the pods they make.

``BUILTIN`` is the table of custom kinds that embed pod templates: (API group, kind) -> the
``Workload`` (its resource name for webhook rules, and each ``Site``: where a pod template or
pod spec sits, and the labels its controller puts on the pods). The paths were checked against
each project's API types (cited per entry). ``extra_workloads`` adds user entries from the
``workloads.extra`` setting (the way Kyverno's autogen annotation and Gatekeeper's
ExpansionTemplate let users name the template paths of other CRDs).

A path is a tuple of keys; ``*`` means every item of a list (Ray worker groups, JobSet replicated
jobs). A label value is a literal, ``NAME`` (the object's ``metadata.name``), ``NAME_HASH`` (its
FNV-1a 32 hex, agent-sandbox), ``ITEM_NAME`` /
``ITEM_GROUP`` (the list item's ``name`` / ``groupName``) or ``PER_POD`` (the controller sets a
value per pod or per generated object, unknown before it exists). Pure module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAME = "<name>"
ITEM_NAME = "<item.name>"
ITEM_GROUP = "<item.groupName>"
NAME_HASH = "<fnv1a32(name)>"
PER_POD = "<per pod>"
UNKNOWN_VALUE = "\x00per-pod"
"""What a ``PER_POD`` label holds when policies are matched: not a valid label value, so a
selector that names values never equals it while ``Exists`` sees the key."""


@dataclass(frozen=True)
class Site:
    """One place in a custom resource that becomes pods.

    Attributes:
        path: keys down to a PodTemplateSpec (``{"metadata", "spec"}``), or to a PodSpec when
            ``pod_spec`` is set; ``*`` walks every item of a list.
        pod_spec: the path holds a PodSpec; the pods' labels and annotations are the object's
            own plus the maps at ``labels_at`` / ``annotations_at`` (KServe).
        labels: labels the controller adds to every pod of this site (values as in the module
            docstring).
        model_keys: PodSpec-shaped sites only: keys of a model-framework container the
            controller turns into the first container (KServe predictors).
    """

    path: tuple[str, ...]
    pod_spec: bool = False
    labels_at: tuple[str, ...] = ()
    annotations_at: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    model_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Workload:
    """A custom kind whose objects embed pod templates: its plural ``resource`` (webhook rules,
    scope) and its ``sites``."""

    group: str
    kind: str
    resource: str
    sites: tuple[Site, ...]


_SANDBOX = {"agents.x-k8s.io/sandbox-name-hash": PER_POD}
_RAY_HEAD = {"ray.io/node-type": "head", "ray.io/group": "headgroup", "ray.io/is-ray-node": "yes"}
_RAY_WORKER = {
    "ray.io/node-type": "worker",
    "ray.io/group": ITEM_GROUP,
    "ray.io/is-ray-node": "yes",
}
_JOB_PER_POD = {
    "job-name": PER_POD,
    "batch.kubernetes.io/job-name": PER_POD,
    "controller-uid": PER_POD,
    "batch.kubernetes.io/controller-uid": PER_POD,
}
_KSERVE_MODEL_KEYS = (
    "model", "sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface",
    "pmml", "lightgbm", "paddle",
)  # fmt: skip


def _ray(kind: str, resource: str, base: tuple[str, ...], cluster: str) -> Workload:
    labels = {"ray.io/cluster": cluster}
    return Workload(
        "ray.io",
        kind,
        resource,
        (
            Site((*base, "headGroupSpec", "template"), labels={**labels, **_RAY_HEAD}),
            Site((*base, "workerGroupSpecs", "*", "template"), labels={**labels, **_RAY_WORKER}),
        ),
    )


def _kserve_component(component: str, model_keys: tuple[str, ...] = ()) -> Site:
    base = ("spec", component)
    return Site(
        base,
        pod_spec=True,
        labels_at=(*base, "labels"),
        annotations_at=(*base, "annotations"),
        labels={"serving.kserve.io/inferenceservice": NAME, "component": component},
        model_keys=model_keys,
    )


def _llm_workload(base: tuple[str, ...]) -> tuple[Site, ...]:
    return tuple(
        Site(
            (*base, key),
            pod_spec=True,
            labels_at=(*base, "labels"),
            annotations_at=(*base, "annotations"),
        )
        for key in ("template", "worker")
    )


_LWS = "leaderworkerset.sigs.k8s.io/"
_LWS_LABELS = {
    _LWS + "name": NAME,
    _LWS + "group-index": PER_POD,
    _LWS + "template-revision-hash": PER_POD,
}
_BUILTIN_LIST: tuple[Workload, ...] = (
    # kubernetes-sigs/agent-sandbox api/v1alpha1/sandbox_types.go: SandboxSpec.PodTemplate
    # (`json:"podTemplate"`, metadata + spec); controllers/sandbox_controller.go createPod labels
    # the pod agents.x-k8s.io/sandbox-name-hash = FNV-1a 32 of the Sandbox name (hex).
    Workload(
        "agents.x-k8s.io",
        "Sandbox",
        "sandboxes",
        (Site(("spec", "podTemplate"), labels={"agents.x-k8s.io/sandbox-name-hash": NAME_HASH}),),
    ),
    # extensions/api/*/sandboxtemplate_types.go: SandboxTemplateSpec.PodTemplate, copied into
    # each Sandbox a claim or warm pool creates (names unknown until then).
    Workload(
        "extensions.agents.x-k8s.io",
        "SandboxTemplate",
        "sandboxtemplates",
        (Site(("spec", "podTemplate"), labels=_SANDBOX),),
    ),
    # extensions/api/v1alpha1/sandboxwarmpool_types.go (earlier releases): SandboxWarmPoolSpec
    # .PodTemplate (`json:"podTemplate"`); current pools name a template instead
    # (sandboxTemplateRef: no view here, the SandboxTemplate itself is judged).
    Workload(
        "extensions.agents.x-k8s.io",
        "SandboxWarmPool",
        "sandboxwarmpools",
        (Site(("spec", "podTemplate"), labels=_SANDBOX),),
    ),
    # kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go: LeaderWorkerTemplate
    # .LeaderTemplate / .WorkerTemplate (*corev1.PodTemplateSpec); labels from pkg/utils
    # (leaderworkerset.sigs.k8s.io/name, group-index, worker-index: 0 for the leader).
    Workload(
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
        "leaderworkersets",
        (
            Site(
                ("spec", "leaderWorkerTemplate", "leaderTemplate"),
                labels={**_LWS_LABELS, _LWS + "worker-index": "0"},
            ),
            Site(
                ("spec", "leaderWorkerTemplate", "workerTemplate"),
                labels={**_LWS_LABELS, _LWS + "worker-index": PER_POD},
            ),
        ),
    ),
    # ray-project/kuberay ray-operator/apis/ray/v1/raycluster_types.go: HeadGroupSpec.Template,
    # WorkerGroupSpecs[].Template (corev1.PodTemplateSpec); rayservice_types.go
    # RayClusterSpec `json:"rayClusterConfig"`, rayjob_types.go `json:"rayClusterSpec"` (the
    # cluster those create gets a generated name). Labels: ray-operator/controllers/ray/utils.
    _ray("RayCluster", "rayclusters", ("spec",), NAME),
    _ray("RayService", "rayservices", ("spec", "rayClusterConfig"), PER_POD),
    _ray("RayJob", "rayjobs", ("spec", "rayClusterSpec"), PER_POD),
    # kserve/kserve pkg/apis/serving/v1beta1/predictor.go: PredictorSpec inlines corev1.PodSpec
    # and ComponentExtensionSpec (labels, annotations); a model framework (tensorflow, ...)
    # becomes the first container, kserve-container. Transformer/explainer likewise.
    Workload(
        "serving.kserve.io",
        "InferenceService",
        "inferenceservices",
        (
            _kserve_component("predictor", _KSERVE_MODEL_KEYS),
            _kserve_component("transformer"),
            _kserve_component("explainer"),
        ),
    ),
    # pkg/apis/serving/v1alpha2/llm_inference_service_types.go: WorkloadSpec (inline, and
    # `json:"prefill"`) has Template and Worker (*corev1.PodSpec), Labels and Annotations.
    Workload(
        "serving.kserve.io",
        "LLMInferenceService",
        "llminferenceservices",
        (*_llm_workload(("spec",)), *_llm_workload(("spec", "prefill"))),
    ),
    # kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go: ReplicatedJob.Template
    # (batchv1.JobTemplateSpec); labels jobset.sigs.k8s.io/jobset-name, replicatedjob-name,
    # job-index, and the Job controller's own (job names are generated per index).
    Workload(
        "jobset.x-k8s.io",
        "JobSet",
        "jobsets",
        (
            Site(
                ("spec", "replicatedJobs", "*", "template", "spec", "template"),
                labels={
                    "jobset.sigs.k8s.io/jobset-name": NAME,
                    "jobset.sigs.k8s.io/replicatedjob-name": ITEM_NAME,
                    "jobset.sigs.k8s.io/job-index": PER_POD,
                    **_JOB_PER_POD,
                },
            ),
        ),
    ),
    # argoproj/argo-rollouts pkg/apis/rollouts/v1alpha1/types.go: RolloutSpec.Template
    # (corev1.PodTemplateSpec); its ReplicaSets add rollouts-pod-template-hash.
    Workload(
        "argoproj.io",
        "Rollout",
        "rollouts",
        (Site(("spec", "template"), labels={"rollouts-pod-template-hash": PER_POD}),),
    ),
)
BUILTIN: Mapping[tuple[str, str], Workload] = {(w.group, w.kind): w for w in _BUILTIN_LIST}

CONTROLLER_LABELS: Mapping[str, Mapping[str, str]] = {
    # k8s.io/kubernetes pkg/controller/job/job_controller.go (manageJob: the job-name and
    # controller-uid labels, both spellings; the Job's name is known from the manifest).
    "Job": {
        "job-name": NAME,
        "batch.kubernetes.io/job-name": NAME,
        "controller-uid": PER_POD,
        "batch.kubernetes.io/controller-uid": PER_POD,
    },
    # A CronJob's Jobs are named <cronjob>-<scheduled time>.
    "CronJob": _JOB_PER_POD,
    # pkg/controller/statefulset/stateful_set_utils.go: statefulset.kubernetes.io/pod-name,
    # apps.kubernetes.io/pod-index (PodIndexLabel), controller-revision-hash.
    "StatefulSet": {
        "statefulset.kubernetes.io/pod-name": PER_POD,
        "apps.kubernetes.io/pod-index": PER_POD,
        "controller-revision-hash": PER_POD,
    },
    # pkg/controller/deployment: pod-template-hash on its ReplicaSets' templates.
    "Deployment": {"pod-template-hash": PER_POD},
    # pkg/controller/daemon: controller-revision-hash, pod-template-generation.
    "DaemonSet": {"controller-revision-hash": PER_POD, "pod-template-generation": PER_POD},
}
"""Labels the built-in controllers add to the pods of a template (ReplicaSet: none)."""


def parse_path(text: str) -> tuple[str, ...]:
    """``spec.groups[*].template`` -> ``("spec", "groups", "*", "template")``.

    Raises:
        ValueError: an empty path or step.
    """
    steps: list[str] = []
    for part in text.split("."):
        key, star, rest = part.partition("[*]")
        if not key or rest:
            raise ValueError(f"{text!r}: steps are keys, optionally followed by [*]")
        steps.append(key)
        if star:
            steps.append("*")
    return tuple(steps)


def extra_workloads(entries: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Workload]:
    """Workloads from the ``workloads.extra`` setting (already validated: ``group``, ``kind``,
    ``resource``, ``templates`` paths to PodTemplateSpecs); no controller labels are known."""
    out: dict[tuple[str, str], Workload] = {}
    for entry in entries:
        sites = tuple(Site(parse_path(path)) for path in entry["templates"])
        out[(entry["group"], entry["kind"])] = Workload(
            entry["group"], entry["kind"], entry["resource"], sites
        )
    return out


def fnv1a32(text: str) -> str:
    """FNV-1a 32-bit of ``text`` (UTF-8) as 8 hex digits: agent-sandbox's sandbox-name-hash."""
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{value:08x}"
