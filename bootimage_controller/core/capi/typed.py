"""An AWSMachineTemplate's `spec` read into CAPA's Go types and written back, as the Machine Config
Operator does before it names a new template (MCO #6082 `reconcileAWSCAPIMachineInfraTemplate`:
`runtime.DefaultUnstructuredConverter.FromUnstructured`, then `ToUnstructured`, then
`json.Marshal(obj["spec"])` for the hash).

The round trip is not the identity, so the hash of the raw spec is not the MCO's: fields CAPA does not
know are dropped; fields without `omitempty` come back with their zero value (`instanceType: ""`,
`template.metadata: {}`); empty `omitempty` values (`""`, `0`, `false`, `[]`, `{}`) disappear.

The types come from `aws_template_shape` (generated from CAPA's Go structs by hack/gen_capi_shape.py);
tests/core/capi/test_template_names.py checks the result against a Go program built with those
types. A typed value is kept as plain data: a struct is a tuple of `(field, value)` pairs in field
order, nil is `None`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .aws_template_shape import ROOT, STRUCTS


class TemplateShapeError(ValueError):
    """A value CAPA's types cannot hold (the MCO's FromUnstructured fails on it too)."""

    def __init__(self, path: str, want: str, got: object) -> None:
        super().__init__(f"{path or 'spec'}: want {want}, have {type(got).__name__}")
        self.path = path


def aws_template_spec_round_trip(spec: Mapping[str, Any]) -> Any:
    """`ToUnstructured(FromUnstructured(template))["spec"]` for an AWSMachineTemplate's spec."""
    return _to_unstructured(ROOT, _from_unstructured(ROOT, spec, ""))


def _from_unstructured(type_: Any, value: Any, path: str) -> Any:
    """The Go value a JSON value becomes (absent and null both give the zero value)."""
    if isinstance(type_, tuple):
        wrapper, elem = type_
        if value is None:
            return None
        if wrapper == "ptr":
            return _from_unstructured(elem, value, path)
        if wrapper == "slice":
            if not isinstance(value, list):
                raise TemplateShapeError(path, "a list", value)
            return [_from_unstructured(elem, v, f"{path}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, Mapping):
            raise TemplateShapeError(path, "an object", value)
        return {str(k): _from_unstructured(elem, v, f"{path}.{k}") for k, v in value.items()}
    if type_.startswith("@"):
        return _struct_from_unstructured(type_, value, path)
    return _scalar(type_, value, path)


def _struct_from_unstructured(type_: str, value: Any, path: str) -> tuple[tuple[Any, Any], ...]:
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise TemplateShapeError(path, "an object", value)
    fields = []
    for f in STRUCTS[type_[1:]]:
        name, _, ftype = f
        if not name:  # embedded: reads the same object
            fields.append((f, _from_unstructured(ftype, value, path)))
        else:
            fields.append((f, _from_unstructured(ftype, value.get(name), f"{path}.{name}" if path else name)))
    return tuple(fields)


_ZERO: dict[str, Any] = {"string": "", "bool": False, "int": 0, "float": 0.0}
_PYTHON: dict[str, tuple[type, ...]] = {"string": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}


def _scalar(type_: str, value: Any, path: str) -> Any:
    if type_ == "opaque" or value is None:
        return value if type_ == "opaque" else _ZERO[type_]
    if isinstance(value, bool) and type_ != "bool":
        raise TemplateShapeError(path, type_, value)
    if type_ == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, _PYTHON[type_]):
        raise TemplateShapeError(path, type_, value)
    return float(value) if type_ == "float" and isinstance(value, int) else value


def _to_unstructured(type_: Any, value: Any) -> Any:
    if isinstance(type_, tuple):
        wrapper, elem = type_
        if value is None:
            return None
        if wrapper == "ptr":
            return _to_unstructured(elem, value)
        if wrapper == "slice":
            return [_to_unstructured(elem, v) for v in value]
        return {k: _to_unstructured(elem, v) for k, v in value.items()}
    if isinstance(type_, str) and type_.startswith("@"):
        out: dict[str, Any] = {}
        for (name, flags, ftype), v in value:
            if ("e" in flags and _is_empty(ftype, v)) or ("z" in flags and _is_zero(ftype, v)):
                continue
            if name:
                out[name] = _to_unstructured(ftype, v)
            else:
                out.update(_to_unstructured(ftype, v))
        return out
    if type_ == "float" and isinstance(value, float) and value.is_integer():
        return int(value)  # Go writes float64(1) as 1, Python as 1.0
    return value


def _is_empty(type_: Any, value: Any) -> bool:
    """apimachinery's `isEmpty` (omitempty): a struct is never empty."""
    if isinstance(type_, tuple):
        return value is None or (type_[0] != "ptr" and len(value) == 0)
    if type_.startswith("@"):
        return False
    return _is_zero(type_, value)


def _is_zero(type_: Any, value: Any) -> bool:
    """reflect.Value.IsZero (omitzero): nil, the scalar's zero, a struct of zero fields; an empty
    slice or map that is not nil is not zero."""
    if isinstance(type_, tuple):
        return value is None
    if type_.startswith("@"):
        return all(_is_zero(f[2], v) for f, v in value)
    return value is None or value == _ZERO.get(type_)


__all__ = ["TemplateShapeError", "aws_template_spec_round_trip"]
