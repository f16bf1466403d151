"""The base of every model: schemas are built on first use, so each Lambda pays only for the models it uses."""

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)
