"""The cluster-wide proxy is carried into the process environment, and only what it says."""

from __future__ import annotations

from bootimage_controller.daemon.proxy import ProxyEnvironment, ProxySettings


def proxy(**status: str) -> dict[str, object]:
    return {"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"}, "status": status}


def test_the_status_is_set_changed_and_cleared() -> None:
    env: dict[str, str] = {}
    proxies = ProxyEnvironment(env)
    assert proxies.apply(ProxySettings.from_object(proxy(httpsProxy="http://p:3128", noProxy=".svc,10.0.0.0/16")))
    assert env == {"HTTPS_PROXY": "http://p:3128", "https_proxy": "http://p:3128",
                   "NO_PROXY": ".svc,10.0.0.0/16", "no_proxy": ".svc,10.0.0.0/16"}
    assert not proxies.apply(ProxySettings.from_object(proxy(httpsProxy="http://p:3128", noProxy=".svc,10.0.0.0/16")))
    assert proxies.apply(ProxySettings.from_object(proxy()))
    assert env == {}


def test_the_pods_own_variables_stay_while_the_proxy_says_nothing() -> None:
    env = {"HTTPS_PROXY": "http://from-the-pod:8080"}
    assert not ProxyEnvironment(env).apply(ProxySettings.from_object(None))
    assert env == {"HTTPS_PROXY": "http://from-the-pod:8080"}
