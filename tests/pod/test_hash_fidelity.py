"""A manifest fingerprints like the pod the API server admits (``snapready hash``/``diff``).

The API server decodes a pod, defaults it and re-encodes it before the webhook writes its
``spec-hash``. These tests cover the parts of that round trip that land in hashed fields:

- quantities written back in canonical form (k8s.io/apimachinery pkg/api/resource quantity.go):
  the tables are apimachinery's own ``quantity_test.go`` cases (named per table), plus values
  that test file parses (``TestQuantityParse``) written out by hand with ``CanonicalizeBytes``;
- ``resourceFieldRef.divisor`` written ``"0"`` when unset (core/v1 types.go: a non-pointer
  ``resource.Quantity``, which encoding/json never omits);
- image volume ``pullPolicy`` (pkg/apis/core/v1/defaults.go ``SetDefaults_Volume``, KEP-4639);
- StatefulSet claim volumes (pkg/controller/statefulset/stateful_set_utils.go ``updateStorage``);
- every captured admitted pod (tests/data/reviews) is left exactly as the API server wrote it.
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import review_files
from webhook.cli import main
from webhook.kube.quantity import parse_quantity
from webhook.kube.quantity_canonical import canonical_quantity
from webhook.kube.token_volume import SERVICE_ACCOUNT_VOLUME_PREFIX
from webhook.kube.workloads import pod_views
from webhook.pod.distill import distill, fingerprint

Pod = dict[str, Any]
DIGEST = "sha256:" + "a" * 64

# ----------------------------------------------------------------------------- quantities

# quantity_test.go TestQuantityString: (expect, alternate). ``expect`` is what String() writes
# and is kept verbatim when parsed ("did not copy canonical string on parse"); ``alternate``
# parses to the same amount and is written as ``expect``.
QUANTITY_STRING = [
    ("1Gi", "1024Mi"),
    ("300Mi", "307200Ki"),
    ("6Ki", ""),
    ("1001Gi", "1025024Mi"),
    ("1Ti", "1024Gi"),
    ("5", "5000m"),
    ("500m", "0.5"),
    ("1G", "1000M"),
    ("1G", "0.001T"),
    ("1m", "1000u"),
    ("80m", ""),
    ("1080m", "1.08"),
    ("1080m", "1080000000n"),
    ("300M", ""),
    ("1T", ""),
    ("1E", ""),
    ("1e21", "1000E"),
    ("5e21", "5000E"),
    ("1e24", "1000000E"),
    ("1234567M", ""),
    ("1234567m", ""),
    ("3k", ""),
    ("1025", ""),
    ("0", ""),
    ("1e9", ".001e12"),
    ("1e-3", "0.001e0"),
    ("1e-9", "1000e-12"),
    ("80e-3", ""),
    ("300e6", ""),
    ("1e12", ""),
    ("1e3", ""),
    ("3e3", ""),
    ("0", "00"),
    ("1n", ""),
    ("80n", ""),
    ("1080n", ""),
    ("1u", ""),
    ("80u", ""),
    ("1080u", ""),
]
# quantity_test.go TestQuantityParseEmit: (in, expect), also checked negated there.
QUANTITY_PARSE_EMIT = [
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
]


def _string_cases() -> list[Any]:
    written_as: dict[str, str] = {}  # each written text once, in table order
    for expect, alternate in QUANTITY_STRING:
        for written in (expect, alternate):
            if written:
                written_as.setdefault(written, expect)
    cases = []
    for written, expect in written_as.items():
        cases.append(pytest.param(written, expect, id=f"string-{written}-is-written-{expect}"))
        if expect != "0":  # the test never expects "-0"
            cases.append(
                pytest.param(f"-{written}", f"-{expect}", id=f"string-minus-{written}-is-{expect}")
            )
    for given_text, expect in QUANTITY_PARSE_EMIT:
        cases.append(pytest.param(given_text, expect, id=f"emit-{given_text}-is-{expect}"))
        cases.append(
            pytest.param(f"-{given_text}", f"-{expect}", id=f"emit-minus-{given_text}-is-{expect}")
        )
    return cases


@pytest.mark.parametrize(("given_value", "expected"), _string_cases())
def test_apimachinery_canonical_form_tables(given_value: str, expected: str) -> None:
    assert canonical_quantity(given_value) == expected


@pytest.mark.parametrize(
    ("given_value", "expected"),
    [
        # TestJSONWhitespace: UnmarshalJSON trims spaces and takes JSON numbers.
        pytest.param(" 1", "1", id="json-leading-space-is-trimmed"),
        pytest.param("1 ", "1", id="json-trailing-space-is-trimmed"),
        pytest.param(1, "1", id="json-number-1"),
        pytest.param(10, "10", id="json-number-10"),
        pytest.param(-1, "-1", id="json-number-minus-1"),
        # TestQuantityParse amounts, written out with CanonicalizeBytes by hand.
        pytest.param("9Ei", "9223372036854775807", id="9Ei-is-capped-at-int64-max"),
        pytest.param("9223372036854775807Ki", "9223372036854775807", id="huge-Ki-is-capped"),
        pytest.param("12E", "12E", id="12E-is-not-capped"),
        pytest.param("100.035Ki", "102435840m", id="fractional-binary-goes-decimal"),
        pytest.param("0.5Mi", "512Ki", id="half-Mi-is-512Ki"),
        pytest.param("0.05Gi", "53687091200m", id="non-integral-binary-is-milli"),
        pytest.param("3.001n", "4n", id="sub-nano-rounds-up"),
        pytest.param("1.1E-9", "2e-9", id="exponent-rounds-up-and-keeps-its-format"),
        pytest.param("0.00000012345", "124n", id="nano-rounding-of-a-long-fraction"),
        pytest.param("1.01E", "1010P", id="fractional-exa"),
        pytest.param("8.1k", "8100", id="fractional-kilo-is-plain"),
        pytest.param("40.1T", "40100G", id="fractional-tera-is-giga"),
        pytest.param("1.3E+6", "1300e3", id="exponent-moves-to-a-multiple-of-3"),
        pytest.param("9.01", "9010m", id="two-decimals-are-milli"),
        pytest.param(".001", "1m", id="leading-dot-milli"),
        pytest.param(".0001k", "100m", id="leading-dot-kilo"),
        # ParseQuantity keeps a string its fast path deems canonical ("if the number is in
        # canonical form, reuse the string"), and MarshalJSON writes it back as sent.
        pytest.param("+1Gi", "+1Gi", id="explicit-plus-is-kept-verbatim"),
        pytest.param("01", "01", id="leading-zero-is-kept-verbatim"),
        pytest.param("1.125", "1.125", id="three-decimals-are-kept-verbatim"),
        pytest.param("1.", "1.", id="trailing-dot-is-kept-verbatim"),
        pytest.param("1.G", "1.G", id="dot-before-suffix-is-kept-verbatim"),
        # JSON floats as kubectl sends them (encoding/json text), then ParseQuantity.
        pytest.param(0.5, "500m", id="float-half-is-500m"),
        pytest.param(1e-7, "100e-9", id="tiny-float-is-an-exponent"),
        pytest.param(1e21, "1e+21", id="huge-float-keeps-its-exponent-text"),
        pytest.param(2.0, "2", id="integral-float-is-an-integer"),
    ],
)
def test_written_form_of_other_inputs(given_value: Any, expected: str) -> None:
    assert canonical_quantity(given_value) == expected


@pytest.mark.parametrize(
    "junk",
    [
        # TestQuantityParse's invalid inputs: the API server rejects them, we leave them be.
        *[
            pytest.param(text, id=f"invalid-{text}")
            for text in ("1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i")
        ],
        pytest.param("-3.01e-", id="invalid-dangling-exponent"),
        pytest.param("", id="empty"),
        pytest.param(True, id="boolean"),
        pytest.param(None, id="null"),
        pytest.param(["1Gi"], id="list"),
        pytest.param({"a": 1}, id="mapping"),
        pytest.param(float("nan"), id="nan"),
        pytest.param("1" * 300, id="300-digits-are-left-alone"),
        pytest.param("1e2147483647", id="exponent-at-the-int32-edge"),
    ],
)
def test_junk_is_left_as_it_is(junk: Any) -> None:
    result = canonical_quantity(junk)
    assert result is junk or result == junk


@pytest.mark.parametrize(
    ("given_value", "expected"),
    [
        # TestQuantityRoundUp: 9.01 at scale -3 is exact (and prints as TestQuantityNeg's 9010m).
        pytest.param("9.01", "9010m", id="exact-at-milli-is-unchanged"),
        pytest.param("1n", "1m", id="one-nano-rounds-up-to-one-milli"),
        pytest.param("1500u", "2m", id="micro-rounds-up"),
        pytest.param("-1500u", "-2m", id="negative-rounds-away-from-zero"),
        pytest.param("1Gi", "1Gi", id="binary-is-unchanged"),
        pytest.param("100m", "100m", id="milli-is-unchanged"),
        pytest.param("1e-20", "1e-3", id="tiny-exponent-rounds-to-1e-3"),
    ],
)
def test_resource_lists_round_up_to_milli(given_value: str, expected: str) -> None:
    # SetDefaults_ResourceList: Quantity.RoundUp(-3) on every ResourceList value.
    assert canonical_quantity(given_value, round_up_to_milli=True) == expected


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "e3", "E-2", "e9"]
quantity_texts = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(["", "-", "+"]),
    st.from_regex(r"[0-9]{0,7}", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,4}", fullmatch=True)),
    st.sampled_from(_SUFFIXES),
)


@given(quantity_texts)
def test_property_written_form_is_a_fixed_point_with_the_same_amount(text: str) -> None:
    written = canonical_quantity(text)
    assert canonical_quantity(written) == written  # the admission path sees written values
    rounded = canonical_quantity(text, round_up_to_milli=True)
    assert canonical_quantity(rounded, round_up_to_milli=True) == rounded
    assert canonical_quantity(written, round_up_to_milli=True) == canonical_quantity(
        text, round_up_to_milli=True
    )
    try:
        amount = parse_quantity(text)
    except ValueError:  # e.g. no digits at all
        return
    assert parse_quantity(written) == amount  # nothing but the spelling changes


@given(st.text(max_size=30))
def test_property_any_text_never_raises(text: str) -> None:
    result = canonical_quantity(text)
    assert isinstance(result, str)
    assert canonical_quantity(result) == result


# ----------------------------------------------------------------------------- hashed fields


def pod_with(volume: dict[str, Any]) -> Pod:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "runtimeClassName": "gvisor",
            "containers": [{"name": "c", "image": f"img@{DIGEST}"}],
            "volumes": [{"name": "v", **volume}],
        },
    }


def downward(divisor: Any = None, *, projected: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"containerName": "c", "resource": "limits.memory"}
    if divisor is not None:
        ref["divisor"] = divisor
    source = {"items": [{"path": "mem", "resourceFieldRef": ref}]}
    return (
        {"projected": {"sources": [{"downwardAPI": source}]}}
        if projected
        else {"downwardAPI": source}
    )


def claim(requests: dict[str, Any]) -> dict[str, Any]:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": requests}}
    return {"ephemeral": {"volumeClaimTemplate": {"spec": spec}}}


# (manifest as written, the same volume as the API server writes it, a different volume)
SAME_AS_ADMITTED = [
    pytest.param(
        {"emptyDir": {"medium": "Memory", "sizeLimit": "1024Mi"}},
        {"emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        {"emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
        id="empty-dir-size-limit-1024Mi-is-1Gi",
    ),
    pytest.param(
        {"emptyDir": {"sizeLimit": 1073741824}},
        {"emptyDir": {"sizeLimit": "1073741824"}},
        {"emptyDir": {"sizeLimit": "1Gi"}},
        id="empty-dir-size-limit-json-number-is-its-digits",
    ),
    pytest.param(
        downward(),
        downward("0"),
        downward("1"),
        id="unset-divisor-is-written-0",
    ),
    pytest.param(
        downward(projected=True),
        downward("0", projected=True),
        downward("1Mi", projected=True),
        id="unset-divisor-in-a-projected-source-is-written-0",
    ),
    pytest.param(
        downward("1024Ki"),
        downward("1Mi"),
        downward("1M"),
        id="divisor-1024Ki-is-1Mi",
    ),
    pytest.param(
        claim({"storage": "1024Mi"}),
        claim({"storage": "1Gi"}),
        claim({"storage": "1G"}),
        id="ephemeral-claim-request-1024Mi-is-1Gi",
    ),
    pytest.param(
        claim({"storage": "1500u"}),
        claim({"storage": "2m"}),
        claim({"storage": "1m"}),
        id="ephemeral-claim-request-rounds-up-to-milli",
    ),
    pytest.param(
        {"image": {"reference": "us-docker.pkg.dev/p/r/llama:v1"}},
        {"image": {"reference": "us-docker.pkg.dev/p/r/llama:v1", "pullPolicy": "IfNotPresent"}},
        {"image": {"reference": "us-docker.pkg.dev/p/r/llama:v1", "pullPolicy": "Always"}},
        id="image-volume-with-a-tag-pulls-if-not-present",
    ),
    pytest.param(
        {"image": {"reference": "us-docker.pkg.dev/p/r/llama"}},
        {"image": {"reference": "us-docker.pkg.dev/p/r/llama", "pullPolicy": "Always"}},
        {"image": {"reference": "us-docker.pkg.dev/p/r/llama", "pullPolicy": "IfNotPresent"}},
        id="untagged-image-volume-always-pulls",
    ),
]


@pytest.mark.parametrize(("written", "admitted", "other"), SAME_AS_ADMITTED)
def test_manifest_hashes_like_the_admitted_pod(
    written: dict[str, Any], admitted: dict[str, Any], other: dict[str, Any]
) -> None:
    assert fingerprint(pod_with(written)) == fingerprint(pod_with(admitted))
    assert fingerprint(pod_with(other)) != fingerprint(pod_with(admitted))


@pytest.mark.parametrize(
    ("reference", "policy"),
    [
        # SetDefaults_Volume: Always when parsers.ParseImageName yields the tag "latest".
        pytest.param("registry.example/models/llama:latest", "Always", id="explicit-latest"),
        pytest.param("llama", "Always", id="docker-hub-short-name-without-tag"),
        pytest.param("localhost:5000/llama", "Always", id="registry-with-port-without-tag"),
        pytest.param(f"llama:latest@{DIGEST}", "Always", id="latest-tag-with-a-digest"),
        pytest.param("llama:v1", "IfNotPresent", id="other-tag"),
        pytest.param(f"llama@{DIGEST}", "IfNotPresent", id="digest-only"),
        # ParseNormalizedNamed errors leave the tag empty: IfNotPresent.
        pytest.param("Llama", "IfNotPresent", id="upper-case-repository-does-not-parse"),
        pytest.param("llama@sha256:" + "A" * 64, "IfNotPresent", id="upper-case-digest-hex"),
        pytest.param("llama@md5:" + "a" * 32, "IfNotPresent", id="unsupported-digest-algorithm"),
        pytest.param("a" * 64, "IfNotPresent", id="bare-64-hex-identifier"),
        pytest.param(None, "IfNotPresent", id="no-reference-in-a-template"),
    ],
)
def test_image_volume_pull_policy_default(reference: str | None, policy: str) -> None:
    source = {} if reference is None else {"reference": reference}
    (volume,) = distill(pod_with({"image": source}))["spec"]["volumes"]
    assert volume["image"]["pullPolicy"] == policy


MANIFEST = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: snap, labels: {app: llm}}
spec:
  runtimeClassName: gvisor
  containers:
  - name: c
    image: img@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    volumeMounts: [{name: shm, mountPath: /dev/shm}, {name: info, mountPath: /info}]
  volumes:
  - name: shm
    emptyDir: {medium: Memory, sizeLimit: 1024Mi}
  - name: info
    downwardAPI:
      items:
      - path: mem
        resourceFieldRef: {containerName: c, resource: limits.memory}
"""
# The same pod as `kubectl get pod -o yaml` showed it (the tester's live.yaml).
LIVE = MANIFEST.replace("sizeLimit: 1024Mi", "sizeLimit: 1Gi").replace(
    "resource: limits.memory}", 'resource: limits.memory, divisor: "0"}'
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_diff_of_a_manifest_and_its_live_pod_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "manifest.yaml").write_text(MANIFEST)
    (tmp_path / "live.yaml").write_text(LIVE)
    code, out, _ = run(capsys, "diff", str(tmp_path / "manifest.yaml"), str(tmp_path / "live.yaml"))
    assert code == 0, out
    assert "fingerprints are equal" in out


# ----------------------------------------------------------------------------- captured pods


def captured_pods() -> list[Any]:
    """Every pod and pod template the API server sent in a captured review."""
    pods = []
    for path in review_files():
        request = json.loads(path.read_text())["request"]
        for key in ("object", "oldObject"):
            obj = request.get(key)
            if isinstance(obj, dict):
                for view in pod_views(obj):
                    pods.append(pytest.param(view.pod, id=f"{path.stem}-{key}"))
    return pods


def _volumes_as_hashed(pod: Pod) -> list[Any]:
    """The pod's volumes with the service-account volume renamed, so that it is hashed too."""
    volumes: list[Any] = copy.deepcopy(pod["spec"].get("volumes", []))
    for volume in volumes:
        if volume["name"].startswith(SERVICE_ACCOUNT_VOLUME_PREFIX):
            volume["name"] = "renamed-token-volume"
    return volumes


@pytest.mark.parametrize("pod", captured_pods())
def test_captured_volumes_are_hashed_exactly_as_the_api_server_wrote_them(pod: Pod) -> None:
    volumes = _volumes_as_hashed(pod)
    hashed = distill({"spec": {"volumes": volumes}})["spec"].get("volumes", [])
    assert hashed == volumes  # no default or quantity spelling changed anything


@pytest.mark.parametrize("pod", captured_pods())
def test_captured_quantities_are_already_in_written_form(pod: Pod) -> None:
    quantities = [
        value
        for container in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", [])
        for kind in ("limits", "requests")
        for value in container.get("resources", {}).get(kind, {}).values()
    ] + [
        volume["emptyDir"]["sizeLimit"]
        for volume in pod["spec"].get("volumes", [])
        if "sizeLimit" in volume.get("emptyDir", {})
    ]
    for value in quantities:
        assert canonical_quantity(value) == value
        assert canonical_quantity(value, round_up_to_milli=True) == value


# Recorded before quantities, divisor and image volume defaults were added (the first five
# equal tests/pod/test_distill.py's pins); none of those changes may move an admitted pod.
CAPTURED_FINGERPRINTS = {
    "01-pod-create-plain-kubectl-run-object": "78d8ee51e11b9a359bd6b0fcab094c0c896bb49eeab22838cdaf305e24744a35",  # noqa: E501
    "02-pod-create-plain-validating-view-object": "78d8ee51e11b9a359bd6b0fcab094c0c896bb49eeab22838cdaf305e24744a35",  # noqa: E501
    "03-pod-create-gvisor-l4x4-gpu4-object": "265fc5e2205294fdab7856aa04e043dfc98d74d2e4771f675e414ff8e14276dc",  # noqa: E501
    "04-pod-create-mig-a100-1g5gb-object": "a0114d7cec8c47ad37847c02c4a949ce18fa6a82321527ab21af4a9fa6e19966",  # noqa: E501
    "05-pod-create-gcsfuse-annotation-csi-object": "3b364dbd3e74b0d382b456dd17c35027b19a30b5d7b2f76d23d19c61bba22924",  # noqa: E501
    "07-pod-create-generatename-object": "10a4b22d2e9851d58e964bf339df5852fff87c2f978d4e9b39da0f538c00e4d9",  # noqa: E501
    "08-pod-create-generatename-validating-view-object": "10a4b22d2e9851d58e964bf339df5852fff87c2f978d4e9b39da0f538c00e4d9",  # noqa: E501
    "13-deployment-create-object": "575e5faa27529c83bfb287d24bea50c7ad131eb6c6e7b9ef3afb71fb6df47c58",  # noqa: E501
    "21-pod-create-dryrun-object": "902079a2c9839aebf9d05ab4af33ce88041ad82714f73f06c1e671e08bcd9fc2",  # noqa: E501
    "30-pod-create-twin-1-object": "902079a2c9839aebf9d05ab4af33ce88041ad82714f73f06c1e671e08bcd9fc2",  # noqa: E501
    "31-pod-create-twin-2-object": "902079a2c9839aebf9d05ab4af33ce88041ad82714f73f06c1e671e08bcd9fc2",  # noqa: E501
    "40-pod-create-by-replicaset-controller-object": "c9fe1168a27677b3f853b4310400e074135cce111a82e14d73a2dbf823d70673",  # noqa: E501
}


def test_every_captured_pod_keeps_its_fingerprint() -> None:
    found = {param.id: fingerprint(param.values[0]) for param in captured_pods()}
    assert found == {key: f"v1:sha256:{value}" for key, value in CAPTURED_FINGERPRINTS.items()}


# ----------------------------------------------------------------------------- StatefulSets

STATEFULSET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: snap}
spec:
  serviceName: web
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      runtimeClassName: gvisor
      containers:
      - name: c
        image: img@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""


def controller_pod(ordinal: int, claims: tuple[str, ...] = ("data",), own: Any = ()) -> Pod:
    """The pod the StatefulSet controller creates for ``ordinal`` (written by hand from
    newStatefulSetPod: name, hostname/subdomain, labels, claim volumes first)."""
    volumes = [
        {"name": name, "persistentVolumeClaim": {"claimName": f"{name}-web-{ordinal}"}}
        for name in claims
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{ordinal}",
            "namespace": "snap",
            "labels": {
                "app": "llm",
                "apps.kubernetes.io/pod-index": str(ordinal),
                "statefulset.kubernetes.io/pod-name": f"web-{ordinal}",
            },
        },
        "spec": {
            "runtimeClassName": "gvisor",
            "hostname": f"web-{ordinal}",
            "subdomain": "web",
            "containers": [
                {
                    "name": "c",
                    "image": f"img@{DIGEST}",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": volumes + list(own),
        },
    }


def write_yaml(path: Path, *docs: Any) -> str:
    path.write_text(
        "---\n".join(d if isinstance(d, str) else yaml.safe_dump(d, sort_keys=False) for d in docs)
    )
    return str(path)


def hash_lines(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[list[str], str]:
    code, out, err = run(capsys, "hash", *argv)
    assert code == 0, err
    return [line.split()[1] for line in out.splitlines()], err


@pytest.mark.parametrize("inject", [True, False], ids=["with-injection", "no-inject"])
def test_statefulset_hash_is_its_first_replica_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], inject: bool
) -> None:
    flags = [] if inject else ["--no-inject"]
    files = [
        write_yaml(tmp_path / "sts.yaml", STATEFULSET),
        write_yaml(tmp_path / "pod0.yaml", controller_pod(0)),
        write_yaml(tmp_path / "pod1.yaml", controller_pod(1)),
    ]
    (sts, pod0, pod1), err = hash_lines(capsys, *flags, *files)
    assert sts == pod0 != pod1
    assert "StatefulSet/snap/web has volumeClaimTemplates" in err
    assert "claimName data-web-N" in err
    assert "replica 0's (pod web-0)" in err
    assert "--ordinal N" in err
    (sts1,), _ = hash_lines(capsys, *flags, "--ordinal", "1", files[0])
    assert sts1 == pod1


INDEXED_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "shard", "namespace": "snap"},
    "spec": {
        "completionMode": "Indexed",
        "completions": 4,
        "template": {
            "metadata": {"labels": {"app": "llm"}},
            "spec": {
                "runtimeClassName": "gvisor",
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": f"img@{DIGEST}"}],
            },
        },
    },
}


def job_pod(index: int) -> dict[str, Any]:
    """The pod the Job controller creates for completion ``index``: the template plus the
    ``batch.kubernetes.io/job-completion-index`` label (and an annotation, not hashed)."""
    template = INDEXED_JOB["spec"]["template"]  # type: ignore[index]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"shard-{index}-",
            "namespace": "snap",
            "labels": {"app": "llm", "batch.kubernetes.io/job-completion-index": str(index)},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": template["spec"],
    }


def test_indexed_job_ordinal_is_its_completion_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A user test found --ordinal silently ignored for Indexed Jobs.
    job = write_yaml(tmp_path / "job.yaml", INDEXED_JOB)
    pods = [write_yaml(tmp_path / f"pod{i}.yaml", job_pod(i)) for i in (0, 2)]
    (template, pod0, pod2), err = hash_lines(capsys, job, *pods)
    assert len({template, pod0, pod2}) == 3
    assert "use --ordinal N for index N" in err
    (index2,), err = hash_lines(capsys, "--ordinal", "2", job)
    assert index2 == pod2
    assert "this value is index 2's" in err


def test_statefulset_start_ordinal_is_the_first_replica(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sts = yaml.safe_load(STATEFULSET)
    sts["spec"]["ordinals"] = {"start": 3}
    files = [
        write_yaml(tmp_path / "s.yaml", sts),
        write_yaml(tmp_path / "p.yaml", controller_pod(3)),
    ]
    (first, pod3), err = hash_lines(capsys, "--no-inject", *files)
    assert first == pod3
    assert "replica 3's (pod web-3)" in err


def test_claim_volumes_replace_template_volumes_of_the_same_name_and_come_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sts = yaml.safe_load(STATEFULSET)
    sts["spec"]["template"]["spec"]["volumes"] = [
        {"name": "data", "emptyDir": {}},  # updateStorage replaces it with the claim
        {"name": "cache", "emptyDir": {}},
    ]
    pod = controller_pod(0, own=[{"name": "cache", "emptyDir": {}}])
    files = [write_yaml(tmp_path / "s.yaml", sts), write_yaml(tmp_path / "p.yaml", pod)]
    (from_sts, from_pod), _ = hash_lines(capsys, "--no-inject", *files)
    assert from_sts == from_pod


def test_several_claim_templates_warn_about_their_random_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sts = yaml.safe_load(STATEFULSET)
    sts["spec"]["volumeClaimTemplates"].append(
        {"metadata": {"name": "logs"}, "spec": {"accessModes": ["ReadWriteOnce"]}}
    )
    pod = controller_pod(0, claims=("data", "logs"))
    files = [write_yaml(tmp_path / "s.yaml", sts), write_yaml(tmp_path / "p.yaml", pod)]
    (from_sts, from_pod), err = hash_lines(capsys, "--no-inject", *files)
    assert from_sts == from_pod  # in volumeClaimTemplates order
    assert "data (claimName data-web-N), logs (claimName logs-web-N)" in err
    assert "random order" in err


def test_statefulset_json_entry_names_the_ordinal_and_template_is_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sts = yaml.safe_load(STATEFULSET)
    before = copy.deepcopy(sts)
    (view,) = pod_views(sts, 2)
    assert view.pod["spec"]["volumes"][0] == {
        "name": "data",
        "persistentVolumeClaim": {"claimName": "data-web-2"},
    }
    assert sts == before
    code, out, _ = run(capsys, "hash", "--json", write_yaml(tmp_path / "s.yaml", STATEFULSET))
    (entry,) = json.loads(out)
    assert (code, entry["ordinal"], len(entry["notes"])) == (0, 0, 1)


def test_diff_compares_the_chosen_replica(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sts = write_yaml(tmp_path / "s.yaml", STATEFULSET)
    pod1 = write_yaml(tmp_path / "p.yaml", controller_pod(1))
    code, out, _ = run(capsys, "diff", sts, pod1)
    assert code == 1
    assert "spec.volumes[0].persistentVolumeClaim.claimName" in out
    assert '"data-web-0"' in out and '"data-web-1"' in out
    code, out, _ = run(capsys, "diff", "--ordinal", "1", sts, pod1)
    assert (code, "fingerprints are equal" in out) == (0, True)


def test_statefulset_without_claim_templates_is_its_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sts = yaml.safe_load(STATEFULSET)
    del sts["spec"]["volumeClaimTemplates"]
    (view,) = pod_views(sts)
    assert view.pod is sts["spec"]["template"] and view.ordinal is None
    _, err = hash_lines(capsys, write_yaml(tmp_path / "s.yaml", sts))
    assert "volumeClaimTemplates" not in err


@pytest.mark.parametrize("bad", ["-1", "x", "1.5"])
def test_ordinal_must_be_a_replica_number(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["hash", "--ordinal", bad, "-"])
    assert exited.value.code == 2
    assert "not a replica ordinal" in capsys.readouterr().err


def test_amounts_survive_the_written_form() -> None:
    # 1.5Gi is "1536Mi" (quantity.go's own doc comment) and still 1.5 * 2^30.
    assert canonical_quantity("1.5Gi") == "1536Mi"
    assert parse_quantity("1536Mi") == Decimal("1.5") * 2**30
