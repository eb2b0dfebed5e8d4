"""Prints, for each Lambda function of the Terraform module, the binary its
zip holds and the names of the environment variables it sets, resolved
through the module's `merge(local.…)` locals: the test compares them with the
variables each floe function reads (floe_core::deploy::Role::env_vars).

usage: terraform_env.py MODULE_DIR
"""
import json
import pathlib
import re
import sys

import hcl2

module = pathlib.Path(sys.argv[1])


def unquote(s):
    # python-hcl2 8 keeps the quotes of block labels and string literals.
    return s[1:-1] if isinstance(s, str) and len(s) > 1 and s[0] == s[-1] == '"' else s


locals_, functions = {}, {}
for tf in sorted(module.glob("*.tf")):
    with tf.open() as f:
        doc = hcl2.load(f)
    for block in doc.get("locals", []):
        locals_.update(block)
    for resource in doc.get("resource", []):
        for kind, named in resource.items():
            if unquote(kind) == "aws_lambda_function":
                for name, body in named.items():
                    functions[unquote(name)] = body


def first(v):
    return v[0] if isinstance(v, list) and len(v) == 1 else v


def keys(expr, seen=()):
    """The variable names an env expression sets: a literal map, a local,
    or a merge() of those (the only forms the module's convention allows)."""
    expr = first(expr)
    if isinstance(expr, dict):
        return set(expr)
    refs = re.findall(r"local\.([A-Za-z0-9_]+)", expr)
    # Inline maps: `{'RUST_LOG': …}` or `{RUST_LOG = …}` depending on the parser.
    literal = set(re.findall(r"[{,]\s*'?([A-Z][A-Z0-9_]*)'?\s*[:=]", expr))
    if not refs and not literal:
        sys.exit(f"cannot resolve environment expression {expr!r}")
    out = set(literal)
    for ref in refs:
        if ref in seen:
            sys.exit(f"local.{ref} refers to itself")
        if ref not in locals_:
            sys.exit(f"local.{ref} is not defined")
        out |= keys(locals_[ref], seen + (ref,))
    return out


zips = first(locals_["zips"])
out = {}
for name, body in functions.items():
    zip_expr = first(body["filename"])
    ref = re.search(r"local\.zips\.([a-z_]+)", zip_expr)
    path = unquote(zips[ref.group(1)] if ref else zip_expr)
    binary = re.search(r"/([a-z0-9-]+)/bootstrap\.zip", path).group(1)
    env = first(first(body["environment"])["variables"])
    out[binary] = sorted(keys(env))
print(json.dumps(out))
