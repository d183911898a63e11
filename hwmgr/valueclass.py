"""`dataclass` and `field` for the classes on the start-up path, without the stdlib's cost.

`dataclasses` imports `inspect` (with `ast`, `dis`, `tokenize`) and compiles source code for
every class it decorates: ~10 ms of an inventory's ~40 ms start plus ~0.4 ms per class. This
decorator builds the same `__init__`, `__repr__`, `__eq__` and (frozen) `__hash__` /
immutability from the class's annotations with plain functions, nothing compiled. It covers
what hwmgr's value classes use: defaults, `field(default_factory=..., hash=False)`, `frozen`;
not `InitVar`, `ClassVar`, inheritance of fields, ordering or keyword-only fields.
`tests/test_valueclass.py` holds it to the stdlib's behaviour for those.
"""

from __future__ import annotations

_MISSING = object()


class Field:
    """A field's default, default factory and whether it takes part in the hash."""

    __slots__ = ("default", "default_factory", "hash", "name")

    def __init__(self, default: object = _MISSING, default_factory: object = _MISSING,
                 hash: bool | None = None) -> None:  # noqa: A002 - dataclasses' own name
        self.default, self.default_factory, self.hash, self.name = (
            default, default_factory, hash, "")


def field(*, default: object = _MISSING, default_factory: object = _MISSING,
          hash: bool | None = None) -> object:  # noqa: A002 - dataclasses' own name
    """Like `dataclasses.field` for `default`, `default_factory` and `hash`."""
    return Field(default, default_factory, hash)


def fields(cls: type) -> tuple[Field, ...]:
    """The fields of a decorated class, in declaration order."""
    return cls.__value_fields__  # type: ignore[attr-defined, no-any-return]


def asdict(obj: object) -> dict[str, object]:
    """{field name: value} (values copied only as far as hwmgr needs: lists, dicts shallow)."""
    out: dict[str, object] = {}
    for f in fields(type(obj)):
        v = getattr(obj, f.name)
        out[f.name] = list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
    return out


class _StdFields:
    """`__dataclass_fields__` built on first access, so the stdlib's `asdict`, `fields`,
    `replace` and `is_dataclass` (by then imported by whoever calls them) accept these
    classes, also nested inside real dataclasses."""

    def __get__(self, obj: object, owner: type) -> dict[str, object]:
        import dataclasses

        out = {}
        for spec in owner.__value_fields__:  # type: ignore[attr-defined]
            kw = {k: v for k, v in (("default", spec.default),
                                     ("default_factory", spec.default_factory))
                  if v is not _MISSING}
            std = dataclasses.field(hash=spec.hash, **kw)  # type: ignore[call-overload]
            std.name = spec.name
            std.type = owner.__annotations__.get(spec.name)
            std._field_type = dataclasses._FIELD  # type: ignore[attr-defined]  # noqa: SLF001
            out[spec.name] = std
        return out


def dataclass(cls: type | None = None, *, frozen: bool = False) -> object:
    """Decorate `cls` (optionally `frozen`) as `dataclasses.dataclass` would."""
    if cls is None:
        return lambda c: _build(c, frozen)
    return _build(cls, frozen)


def _build(cls: type, frozen: bool) -> type:
    specs: list[Field] = []
    for name in cls.__dict__.get("__annotations__", {}):
        value = cls.__dict__.get(name, _MISSING)
        spec = value if isinstance(value, Field) else Field(default=value)
        spec.name = name
        if isinstance(value, Field):  # a field() object is not a class attribute default
            if spec.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        specs.append(spec)
    names = tuple(f.name for f in specs)
    hashed = tuple(f.name for f in specs if f.hash is not False)
    setter = object.__setattr__

    def __init__(self: object, *args: object, **kwargs: object) -> None:  # noqa: N807
        if len(args) > len(specs):
            raise TypeError(f"{cls.__name__}() takes {len(specs)} arguments, got {len(args)}")
        for f, value in zip(specs, args):
            if f.name in kwargs:
                raise TypeError(f"{cls.__name__}() got multiple values for '{f.name}'")
            setter(self, f.name, value)
        for f in specs[len(args):]:
            if f.name in kwargs:
                value = kwargs.pop(f.name)
            elif f.default is not _MISSING:
                value = f.default
            elif f.default_factory is not _MISSING:
                value = f.default_factory()  # type: ignore[operator]
            else:
                raise TypeError(f"{cls.__name__}() missing argument '{f.name}'")
            setter(self, f.name, value)
        if kwargs:
            raise TypeError(f"{cls.__name__}() got unexpected arguments {sorted(kwargs)}")
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def __repr__(self: object) -> str:  # noqa: N807
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{cls.__qualname__}({inner})"

    def __eq__(self: object, other: object) -> bool:  # noqa: N807
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__repr__ = __repr__  # type: ignore[assignment, method-assign]
    cls.__eq__ = __eq__  # type: ignore[assignment, method-assign]
    cls.__value_fields__ = tuple(specs)  # type: ignore[attr-defined]
    cls.__dataclass_fields__ = _StdFields()  # type: ignore[attr-defined]
    if frozen:
        def __hash__(self: object) -> int:  # noqa: N807
            return hash(tuple(getattr(self, n) for n in hashed))

        def __setattr__(self: object, name: str, value: object) -> None:  # noqa: N807
            raise AttributeError(f"cannot assign to field '{name}' of frozen {cls.__name__}")

        def __delattr__(self: object, name: str) -> None:  # noqa: N807
            raise AttributeError(f"cannot delete field '{name}' of frozen {cls.__name__}")

        cls.__hash__ = __hash__  # type: ignore[assignment, method-assign]
        cls.__setattr__ = __setattr__  # type: ignore[assignment, method-assign]
        cls.__delattr__ = __delattr__  # type: ignore[assignment, method-assign]
    else:
        cls.__hash__ = None  # type: ignore[assignment]
    return cls
