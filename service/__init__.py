"""The service layer: ``vapipe serve`` (REST API, MQTT, Prometheus metrics, live page).

Built on the core packages (``pipeline``, ``stages``); the core never imports it.
"""
