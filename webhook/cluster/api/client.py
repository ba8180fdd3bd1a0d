"""The ``kubernetes`` client configuration of cluster mode: ``api_client`` for ``serve`` (kubeconfig
or in-cluster service account) and ``connect`` for the one-shot commands (``status``,
``explain``), with one-line ``ConfigError`` messages for a broken kubeconfig. The transport over
the client is ``transport.KubeTransport``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as kube_client
from kubernetes import config as kube_config

from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.cluster.api.syncing import describe
from webhook.cluster.api.transport import KubeTransport

__all__ = ["SERVICE_ACCOUNT_NAMESPACE", "Connection", "api_client", "config_problem", "connect"]


def api_client(settings: Settings) -> Any:
    """An ``ApiClient`` from ``settings.source.kubeconfig``, else the in-cluster service account.

    Raises:
        ConfigError: the kubeconfig is missing/invalid, or not running in a pod without one.
    """
    configuration = kube_client.Configuration()
    kubeconfig = settings.source.kubeconfig
    try:
        if kubeconfig is not None:
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig),
                client_configuration=configuration,
                persist_config=False,
            )
        else:
            kube_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
    except (kube_config.ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster config"
        raise ConfigError(f"cannot load {where}: {config_problem(exc)}") from None
    return kube_client.ApiClient(configuration)


def config_problem(exc: BaseException) -> str:
    """One line saying what is wrong with a kubeconfig: where its YAML breaks (a parser error
    is several lines), that it is not a mapping (the client fails on a list with a TypeError
    about indices), else ``describe``."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    if isinstance(exc, yaml.YAMLError):
        return f"invalid YAML: {describe(exc)}"
    if isinstance(exc, TypeError | AttributeError) and "indices" in str(exc):
        return "not a kubeconfig (expected a YAML mapping with clusters, contexts and users)"
    return describe(exc)


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class Connection:
    """A transport for a one-shot command (``snapready status``/``explain``).

    Attributes:
        transport: the ``KubeTransport``; ``close``: releases its connection pool.
        namespace: the kubeconfig context's namespace (in a pod: the service account's), else
            ``default``, like ``kubectl``.
        where: what was loaded (``kubeconfig PATH`` or ``in-cluster config``), for messages.
        host: the API server's URL.
    """

    transport: KubeTransport
    namespace: str
    where: str
    close: Callable[[], None]
    host: str = ""


def connect(kubeconfig: Path | None, *, request_timeout: float) -> Connection:
    """Connect the way ``kubectl`` does: ``kubeconfig``, else ``$KUBECONFIG`` (``:``-separated
    files are merged), else ``~/.kube/config`` when it exists, else the in-cluster service
    account. Nothing is requested from the API server yet.

    Raises:
        ConfigError: the configuration cannot be loaded (the message names which one).
    """
    configuration = kube_client.Configuration()
    config_file = str(kubeconfig) if kubeconfig is not None else os.environ.get("KUBECONFIG")
    if not config_file and Path("~/.kube/config").expanduser().is_file():
        config_file = str(Path("~/.kube/config").expanduser())
    where = f"kubeconfig {config_file}" if config_file else "in-cluster config"
    try:
        if config_file:
            contexts = kube_config.list_kube_config_contexts
            _, current = contexts(config_file)  # type: ignore[no-untyped-call]
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=config_file, client_configuration=configuration, persist_config=False
            )
            context = current.get("context") if isinstance(current, dict) else None
            namespace = context.get("namespace") if isinstance(context, dict) else None
        else:
            kube_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
            namespace = _read_text(SERVICE_ACCOUNT_NAMESPACE)
    except (
        kube_config.ConfigException,
        OSError,
        ValueError,
        TypeError,
        KeyError,
        yaml.YAMLError,
    ) as exc:
        hint = "" if config_file else " (no --kubeconfig, $KUBECONFIG or ~/.kube/config)"
        raise ConfigError(f"cannot load {where}{hint}: {config_problem(exc)}") from None
    client = kube_client.ApiClient(configuration)
    return Connection(
        KubeTransport(client, request_timeout),
        namespace if isinstance(namespace, str) and namespace else "default",
        where,
        client.close,
        str(configuration.host),
    )


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
