"""A Python caller's handle on a user's service, valid across lends and reclaims.

WHY not Serve's own ``DeploymentHandle`` of one copy: a copy lives on one server, and
lyra deletes it when it lends that server. This handle calls lyra's ingress for the
service (:meth:`lyra_ray.serving.proxy.AppIngress.call`), which sends the call to the
serving server with the fewest requests in flight per GPU replica, to that copy's
ingress deployment, and counts it in flight there until it returns, so a drain waits
for it as for an HTTP request, and lyra's demand estimate sees it.

Usage mirrors a ``DeploymentHandle``::

    h = Client().service_handle("dense")
    h.remote({"inputs": [...]}).result()        # the ingress's __call__
    h.embed.remote("text").result()             # any other method
    await h.options(method_name="embed").remote("text")

A call is sent again only if it never reached a copy; one that reached it and failed
raises in the caller (lyra cannot know whether a Python method may run twice).
Arguments and results travel as in any Serve handle call (pickled); streaming handle
calls (``stream=True``) are not carried.
"""

from __future__ import annotations

from typing import Any

from lyra_ray.serving.names import ingress_app_name


class ServiceHandle:
    def __init__(self, service: str, method: str = "__call__", _proxy: Any = None) -> None:
        from ray import serve

        self.service = service
        self.method = method
        self._proxy = (
            _proxy if _proxy is not None else serve.get_app_handle(ingress_app_name(service))
        )

    def options(self, *, method_name: str) -> ServiceHandle:
        return ServiceHandle(self.service, method_name, self._proxy)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """The call's ``DeploymentResponse`` (``.result()``, or ``await`` it)."""
        return self._proxy.call.remote(self.method, args, kwargs)

    def __getattr__(self, name: str) -> ServiceHandle:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.options(method_name=name)

    def __repr__(self) -> str:
        return f"ServiceHandle({self.service!r}, method={self.method!r})"
