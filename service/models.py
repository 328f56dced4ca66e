"""Request and response bodies of the REST API (the OpenAPI schema is generated from them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Source", "UriSource", "WebcamSource", "MetadataDestination", "FileDestination", "MqttDestination", "Destination", "PipelineRequest", "SourceRequest", "SourceStatus",
           "InstanceStatus", "InstanceSummary", "PipelineInfo", "ModelInfo", "ErrorBody", "SourceAdded"]

State = Literal["QUEUED", "RUNNING", "COMPLETED", "ERROR", "ABORTED"]


class UriSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["uri"] = Field(description="a file, stream URL or testsrc://")
    uri: str = Field(min_length=1, max_length=4096, description="file:///..., rtsp://..., ...")
    properties: dict[str, Any] | None = Field(None, description="accepted for compatibility; ignored")

    @property
    def location(self) -> str:
        return self.uri


class WebcamSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["webcam"]
    device: str = Field(min_length=1, max_length=256, description="/dev/videoN")
    properties: dict[str, Any] | None = Field(None, description="accepted for compatibility; ignored")

    @property
    def location(self) -> str:
        return self.device


Source = Annotated[Union[UriSource, WebcamSource], Field(discriminator="type")]


class _Metadata(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["dlstreamer", "vapipe"] = Field("dlstreamer", alias="schema",
                                                     description="message shape (default dlstreamer)")


class FileDestination(_Metadata):
    type: Literal["file"]
    path: str = Field(min_length=1, max_length=4096, description="where to write")
    format: Literal["json-lines", "json"] = Field("json", description="one record per line, or one JSON array")

    def as_params(self) -> dict[str, Any]:
        return {"type": "file", "path": self.path, "format": self.format, "schema": self.schema_}


class MqttDestination(_Metadata):
    type: Literal["mqtt"]
    host: str = Field(min_length=1, max_length=512, description="HOST:PORT")
    topic: str = Field(min_length=1, max_length=1024)
    qos: int = Field(0, ge=0, le=2, description="quality of service")
    timeout: int | None = Field(None, description="accepted for compatibility; ignored")
    format: Literal["json-lines", "json"] | None = Field(None, description="accepted for compatibility (clients "
                                                         "send it); every message is one record")
    mqtt_client_id: str | None = Field(None, alias="mqtt-client-id", min_length=1, max_length=128)

    def as_params(self) -> dict[str, Any]:
        return {"type": "mqtt", "host": self.host, "topic": self.topic, "qos": self.qos,
                "mqtt-client-id": self.mqtt_client_id, "schema": self.schema_}


MetadataDestination = Annotated[Union[FileDestination, MqttDestination], Field(discriminator="type")]


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
    reason: str = Field("", description="why a live source is in its state (stream ended, connection refused, "
                        "...); empty while it streams")


class InstanceStatus(BaseModel):
    id: str
    state: State
    avg_fps: float = Field(description="frames per second of its sources, each averaged over its life (from its "
                           "first to its latest frame)")
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
