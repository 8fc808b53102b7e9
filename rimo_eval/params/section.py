"""The base of every typed params section (and a plugin backend's, whose keys its plugin checks)
and the number types the sections share."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

# YAML writes 60 and 60.0 alike for a number; keep what was written (no int -> float coercion).
Number = int | float
NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
PosNumber = Annotated[Number, Field(gt=0)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    def as_dict(self) -> dict[str, Any]:
        """The keys the file set, as plain data: what a backend or a fingerprint sees."""
        return self.model_dump(mode="python", exclude_unset=True)


class PluginSection(Section):
    """A plugin backend's ``predict.<name>``: the keys as the file gives them, unchecked here
    (the plugin checks them); ``as_dict()`` is that mapping."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
