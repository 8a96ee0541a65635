"""Find the ``extern "C"`` functions of a C++ source and describe their parameters.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# C type spelling -> (kind, detail). Pointers map to the torch dtypes they accept ("*" = any).
_SCALARS = {
    "float": "c_float",
    "double": "c_double",
    "bool": "c_bool",
    "char": "c_char",
    "int": "c_int",
    "signed int": "c_int",
    "unsigned": "c_uint",
    "unsigned int": "c_uint",
    "short": "c_short",
    "unsigned short": "c_ushort",
    "long": "c_long",
    "unsigned long": "c_ulong",
    "long long": "c_longlong",
    "unsigned long long": "c_ulonglong",
    "long int": "c_long",
    "long long int": "c_longlong",
    "int8_t": "c_int8",
    "uint8_t": "c_uint8",
    "int16_t": "c_int16",
    "uint16_t": "c_uint16",
    "int32_t": "c_int32",
    "uint32_t": "c_uint32",
    "int64_t": "c_int64",
    "uint64_t": "c_uint64",
    "size_t": "c_size_t",
    "ptrdiff_t": "c_ssize_t",
    "std::int64_t": "c_int64",
    "std::int32_t": "c_int32",
    "std::size_t": "c_size_t",
}
_POINTEES = {
    "float": ("float32",),
    "double": ("float64",),
    "_Float16": ("float16",),
    "__bf16": ("bfloat16",),
    "int8_t": ("int8",),
    "signed char": ("int8",),
    "uint8_t": ("uint8", "bool"),
    "unsigned char": ("uint8", "bool"),
    "char": ("int8", "uint8", "bool"),
    "bool": ("bool",),
    "int16_t": ("int16",),
    "short": ("int16",),
    "uint16_t": ("float16", "bfloat16", "int16", "uint16"),
    "unsigned short": ("float16", "bfloat16", "int16", "uint16"),
    "int32_t": ("int32",),
    "int": ("int32",),
    "uint32_t": ("int32", "uint32"),
    "unsigned": ("int32", "uint32"),
    "unsigned int": ("int32", "uint32"),
    "int64_t": ("int64",),
    "long": ("int64",),
    "long long": ("int64",),
    "long int": ("int64",),
    "size_t": ("int64", "uint64"),
    "uint64_t": ("int64", "uint64"),
    "std::int64_t": ("int64",),
    "std::int32_t": ("int32",),
    "void": ("*",),
}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|static|inline|struct)\b")
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)|__declspec\s*\([^)]*\)|\[\[[^\]]*\]\]")


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str  # as written, normalised
    pointer: bool
    accepts: tuple[str, ...] = ()  # torch dtype names a pointer parameter accepts ("*": any)
    scalar: str | None = None  # ctypes type name of a by-value parameter


@dataclass(frozen=True)
class Function:
    name: str
    returns: str | None  # ctypes type name, or None for void
    params: tuple[Param, ...]
    signature: str  # the declaration as written (normalised whitespace)
    unsupported: str | None = None  # why Python cannot call it, if it cannot


# A comment, or a string/char literal (unterminated ones run to the end, as a compiler would complain about).
_LEXEME = re.compile(r"""//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)|"(?:\\[\s\S]?|[^"\\])*"?|'(?:\\[\s\S]?|[^'\\])*'?""")


def _blank(match: re.Match[str]) -> str:
    text = match.group()
    if text.startswith("//"):
        return ""
    if text.startswith("/*"):
        return " "
    return text if text == '"C"' else text[0] * 2


def strip_comments(source: str) -> str:
    """Remove comments and the contents of string/char literals (keeping ``extern "C"``)."""
    return _LEXEME.sub(_blank, source)


def _flatten_braces(text: str) -> str:
    """Replace every top-level ``{...}`` body by ``{}`` so only depth-0 text remains."""
    out, depth = [], 0
    for ch in text:
        if ch == "{":
            if depth == 0:
                out.append("{}")
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _matching_brace(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


_HEADER = re.compile(r"([A-Za-z_][\w:\s\*&<>,]*?)\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?:noexcept\s*)?(?:\{\}|;)")


def strip_directives(text: str) -> str:
    """Drop preprocessor lines (with their backslash continuations): a #define body is not a declaration."""
    out, continued = [], False
    for line in text.splitlines():
        directive = continued or line.lstrip().startswith("#")
        continued = directive and line.rstrip().endswith("\\")
        out.append("" if directive else line)
    return "\n".join(out)


def extern_c_functions(source: str) -> list[Function]:
    text = _ATTRIBUTE.sub(" ", strip_directives(strip_comments(source)))
    chunks: list[str] = []
    for match in re.finditer(r'extern\s+"C"\s*', text):
        rest = match.end()
        if rest < len(text) and text[rest] == "{":
            end = _matching_brace(text, rest)
            chunks.append(_flatten_braces(text[rest + 1 : end]))
        else:
            body = _flatten_braces(text[rest:])
            stop = min((i for i in (body.find("{}"), body.find(";")) if i >= 0), default=len(body))
            chunks.append(body[: stop + (2 if body[stop : stop + 2] == "{}" else 1)])
    functions: dict[str, Function] = {}
    for chunk in chunks:
        for m in _HEADER.finditer(chunk):
            if re.search(r"\bstatic\b", m.group(1)):
                continue  # internal linkage: not exported
            fn = _function(m.group(1), m.group(2), m.group(3))
            functions[fn.name] = fn
    return list(functions.values())


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _function(ret: str, name: str, params: str) -> Function:
    ret_type = _norm(_QUALIFIERS.sub(" ", ret).replace("extern", " "))
    signature = _norm(f"{_norm(ret)} {name}({_norm(params)})")
    why = None
    if ret_type == "void":
        returns = None
    elif ret_type in _SCALARS:
        returns = _SCALARS[ret_type]
    else:
        returns, why = None, f"return type {ret_type!r} is not supported (return void or a scalar)"
    parsed: list[Param] = []
    plist = _norm(params)
    if plist and plist != "void":
        for i, raw in enumerate(plist.split(",")):
            param, problem = _param(raw, i)
            parsed.append(param)
            why = why or problem
    return Function(name=name, returns=returns, params=tuple(parsed), signature=signature, unsupported=why)


def _param(raw: str, index: int) -> tuple[Param, str | None]:
    text = _norm(_QUALIFIERS.sub(" ", raw.split("=")[0]))
    stars = text.count("*")
    match = re.match(r"^(.*?)([A-Za-z_]\w*)?$", text.replace("*", " ").strip())
    base, pname = _norm(match.group(1) if match else text), match.group(2) if match else None
    if pname and (base == "" or pname in ("int", "float", "double", "long", "char", "bool", "short", "unsigned")):
        base, pname = _norm(f"{base} {pname}"), None
    pname = pname or f"arg{index}"
    if "&" in text or "<" in text:
        return Param(pname, text, False), f"parameter {index} ({text!r}) is not supported: use a pointer or a scalar"
    if stars > 1:
        return Param(pname, text, True), f"parameter {index} ({text!r}) is a pointer to a pointer: pass void* instead"
    if stars == 1:
        if base not in _POINTEES:
            return Param(pname, text, True), f"parameter {index} ({text!r}) points to an unsupported type: use void*"
        return Param(pname, base + "*", True, accepts=_POINTEES[base]), None
    if base not in _SCALARS:
        return Param(pname, text, False), f"parameter {index} ({text!r}) has an unsupported type"
    return Param(pname, base, False, scalar=_SCALARS[base]), None
