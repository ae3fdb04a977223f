"""The core/v1 operations the daemon sends, without kubernetes_asyncio's generated `CoreV1Api`.

The generated module holds about 400 operations and their docstrings: 2.4 MB of bytecode, 3.4 MiB
resident for the daemon's whole life, for the eleven operations below (issue 36: 120 MiB at 5,000
MachineSets). Each method here sends what the `CoreV1Api` method of the same name sends, through
the same `ApiClient.call_api`: the same path, query parameters, headers and body, the instrumented
`request` (rate limit, fence, metrics), and the answer deserialised into the same model (or left
raw with `_preload_content=False`). tests/kube/test_core_api.py sends every operation both ways to
one recording server and compares the requests and the answers. The commands use it too, so
that one client shape serves the whole project; an operation not here is added with its test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiTypeError

from .client import BEARER_TOKEN_AUTH

# Python keyword -> query parameter, in the order the generated client sends them.
_QUERY = {
    "pretty": "pretty",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "_continue": "continue",
    "dry_run": "dryRun",
    "field_manager": "fieldManager",
    "field_selector": "fieldSelector",
    "field_validation": "fieldValidation",
    "force": "force",
    "label_selector": "labelSelector",
    "limit": "limit",
    "resource_version": "resourceVersion",
    "resource_version_match": "resourceVersionMatch",
    "send_initial_events": "sendInitialEvents",
    "timeout_seconds": "timeoutSeconds",
    "watch": "watch",
}
_LIST = ("pretty", "allow_watch_bookmarks", "_continue", "field_selector", "label_selector", "limit",
         "resource_version", "resource_version_match", "send_initial_events", "timeout_seconds", "watch")
_READ = ("pretty",)
_CREATE = ("pretty", "dry_run", "field_manager", "field_validation")
_PATCH = ("pretty", "dry_run", "field_manager", "field_validation", "force")
_OPTIONS = ("async_req", "_return_http_data_only", "_preload_content", "_request_timeout", "_request_auth",
            "_content_type", "_headers")
_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json", "application/apply-patch+yaml", "application/apply-patch+cbor"]


class CoreApi:
    """`CoreV1Api`'s operations on ConfigMaps, Secrets, Events and Nodes that the daemon sends."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def list_namespaced_config_map(self, namespace: str, **kwargs: Any) -> Any:
        return self._call("list_namespaced_config_map", "GET", "/api/v1/namespaces/{namespace}/configmaps",
                          {"namespace": namespace}, _LIST, "V1ConfigMapList", kwargs)

    def read_namespaced_config_map(self, name: str, namespace: str, **kwargs: Any) -> Any:
        return self._call("read_namespaced_config_map", "GET", "/api/v1/namespaces/{namespace}/configmaps/{name}",
                          {"name": name, "namespace": namespace}, _READ, "V1ConfigMap", kwargs)

    def create_namespaced_config_map(self, namespace: str, body: Any, **kwargs: Any) -> Any:
        return self._call("create_namespaced_config_map", "POST", "/api/v1/namespaces/{namespace}/configmaps",
                          {"namespace": namespace}, _CREATE, "V1ConfigMap", kwargs, body)

    def patch_namespaced_config_map(self, name: str, namespace: str, body: Any, **kwargs: Any) -> Any:
        return self._call("patch_namespaced_config_map", "PATCH", "/api/v1/namespaces/{namespace}/configmaps/{name}",
                          {"name": name, "namespace": namespace}, _PATCH, "V1ConfigMap", kwargs, body)

    def read_namespaced_secret(self, name: str, namespace: str, **kwargs: Any) -> Any:
        return self._call("read_namespaced_secret", "GET", "/api/v1/namespaces/{namespace}/secrets/{name}",
                          {"name": name, "namespace": namespace}, _READ, "V1Secret", kwargs)

    def patch_namespaced_secret(self, name: str, namespace: str, body: Any, **kwargs: Any) -> Any:
        return self._call("patch_namespaced_secret", "PATCH", "/api/v1/namespaces/{namespace}/secrets/{name}",
                          {"name": name, "namespace": namespace}, _PATCH, "V1Secret", kwargs, body)

    def create_namespaced_event(self, namespace: str, body: Any, **kwargs: Any) -> Any:
        return self._call("create_namespaced_event", "POST", "/api/v1/namespaces/{namespace}/events",
                          {"namespace": namespace}, _CREATE, "CoreV1Event", kwargs, body)

    def patch_namespaced_event(self, name: str, namespace: str, body: Any, **kwargs: Any) -> Any:
        return self._call("patch_namespaced_event", "PATCH", "/api/v1/namespaces/{namespace}/events/{name}",
                          {"name": name, "namespace": namespace}, _PATCH, "CoreV1Event", kwargs, body)

    def list_node(self, **kwargs: Any) -> Any:
        return self._call("list_node", "GET", "/api/v1/nodes", {}, _LIST, "V1NodeList", kwargs)

    def read_node(self, name: str, **kwargs: Any) -> Any:
        return self._call("read_node", "GET", "/api/v1/nodes/{name}", {"name": name}, _READ, "V1Node", kwargs)

    def patch_node(self, name: str, body: Any, **kwargs: Any) -> Any:
        return self._call("patch_node", "PATCH", "/api/v1/nodes/{name}", {"name": name}, _PATCH, "V1Node", kwargs, body)

    def _call(self, operation: str, method: str, path: str, path_params: Mapping[str, str], allowed: tuple[str, ...],
              model: str, kwargs: Mapping[str, Any], body: Any = None) -> Any:
        for key in kwargs:
            if key not in allowed and key not in _OPTIONS:
                raise ApiTypeError(f"Got an unexpected keyword argument '{key}' to method {operation}")
        query = [(_QUERY[k], kwargs[k]) for k in allowed if kwargs.get(k) is not None]
        headers = dict(kwargs.get("_headers", {}))
        headers["Accept"] = "application/json"
        if method == "PATCH":
            headers["Content-Type"] = kwargs.get(
                "_content_type", self.api_client.select_header_content_type(_PATCH_TYPES, "PATCH", body))
        answers: dict[int, str | None] = {200: model, 401: None}
        if method in ("POST", "PATCH"):
            answers[201] = model
        if method == "POST":
            answers[202] = model
        return self.api_client.call_api(
            path, method, dict(path_params), query, headers,
            body=body, post_params=[], files={}, response_types_map=answers, auth_settings=[BEARER_TOKEN_AUTH],
            async_req=kwargs.get("async_req"), _return_http_data_only=True,
            _preload_content=kwargs.get("_preload_content", True), _request_timeout=kwargs.get("_request_timeout"),
            collection_formats={}, _request_auth=kwargs.get("_request_auth"),
        )
