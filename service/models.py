"""Request and response bodies of the REST API (the OpenAPI schema is generated from them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Source", "MetadataDestination", "Destination", "PipelineRequest", "SourceRequest", "SourceStatus",
           "InstanceStatus", "InstanceSummary", "PipelineInfo", "ModelInfo", "ErrorBody", "SourceAdded"]

State = Literal["QUEUED", "RUNNING", "COMPLETED", "ERROR", "ABORTED"]


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["uri", "webcam"] = Field("uri", description="uri (a file, stream URL or testsrc://) or webcam")
    uri: str | None = Field(None, min_length=1, max_length=4096, description="file:///..., rtsp://..., ...")
    device: str | None = Field(None, min_length=1, max_length=256, description="webcam: /dev/videoN")
    properties: dict[str, Any] | None = Field(None, description="accepted for compatibility; ignored")

    @model_validator(mode="after")
    def _one_location(self) -> Source:
        if self.type == "uri" and not self.uri:
            raise ValueError("source.uri is required for type 'uri'")
        if self.type == "webcam" and not self.device:
            raise ValueError("source.device is required for type 'webcam'")
        return self

    @property
    def location(self) -> str:
        return (self.uri if self.type == "uri" else self.device) or ""


class MetadataDestination(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["file", "mqtt"]
    path: str | None = Field(None, min_length=1, max_length=4096, description="file: where to write")
    format: Literal["json-lines", "json"] = Field("json", description="file: one record per line, or one array")
    host: str | None = Field(None, min_length=1, max_length=512, description="mqtt: HOST:PORT")
    topic: str | None = Field(None, min_length=1, max_length=1024, description="mqtt: topic")
    qos: int = Field(0, ge=0, le=2, description="mqtt: quality of service")
    timeout: int | None = Field(None, description="accepted for compatibility; ignored")
    mqtt_client_id: str | None = Field(None, alias="mqtt-client-id", min_length=1, max_length=128)
    schema_: Literal["dlstreamer", "vapipe"] = Field("dlstreamer", alias="schema",
                                                     description="message shape (default dlstreamer)")

    @model_validator(mode="after")
    def _complete(self) -> MetadataDestination:
        if self.type == "file" and not self.path:
            raise ValueError("destination.metadata.path is required for type 'file'")
        if self.type == "mqtt" and not (self.host and self.topic):
            raise ValueError("destination.metadata.host and topic are required for type 'mqtt'")
        return self

    def as_params(self) -> dict[str, Any]:
        return {"type": self.type, "path": self.path, "format": self.format, "host": self.host, "topic": self.topic,
                "qos": self.qos, "mqtt-client-id": self.mqtt_client_id, "schema": self.schema_}


class Destination(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: MetadataDestination | None = None


class PipelineRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: Source
    destination: Destination | None = None
    parameters: dict[str, Any] = Field(default_factory=dict, description="STAGE.PARAM or declared names")
    tags: dict[str, Any] = Field(default_factory=dict, description="added to every message as 'tags'")


class SourceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    uri: str = Field(min_length=1, max_length=4096)


class SourceAdded(BaseModel):
    id: str


class SourceStatus(BaseModel):
    id: str
    uri: str
    state: str
    frames: int
    fps: float
    dropped: int
    decode_errors: int
    reconnects: int


class InstanceStatus(BaseModel):
    id: str
    state: State
    avg_fps: float
    start_time: float = Field(description="Unix time (s) it started running; 0 before")
    elapsed_time: float = Field(description="seconds running")
    message: str
    sources: list[SourceStatus] = Field(default_factory=list)


class InstanceSummary(BaseModel):
    id: str
    request: dict[str, Any]
    type: str


class PipelineInfo(BaseModel):
    name: str
    version: str
    type: str
    description: str
    parameters: dict[str, Any]


class ModelInfo(BaseModel):
    name: str
    version: str
    type: str
    description: str


class ErrorBody(BaseModel):
    detail: str
