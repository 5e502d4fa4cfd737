#!/usr/bin/python3
"""Checks the Kubernetes manifests of deploy/ against the Kubernetes API's
types, without an API server (none runs where they were written).

    /usr/bin/python3 deploy/validate_manifests.py [FILE ...]   (default: deploy/k8s/*.yaml deploy/kserve/*.yaml)

The types are those of Debian's python3-kubernetes (the official client,
generated from the Kubernetes OpenAPI spec; 22.6 describes Kubernetes 1.22):
every key of every object must be a field of its type (camelCase, as the API
spells it), every value of the field's type (str, int, bool, map, list, nested
object; int-or-string where the API allows both), and the fields the API
requires present. A KServe ServingRuntime is a custom resource whose schema
is not in Debian: its containers are checked as core/v1 Containers, the rest
only parsed. Prints one line per object; exit 1 when any is wrong.
"""
import glob
import os
import re
import sys

import yaml

try:
    import kubernetes.client as k8s
    from kubernetes.client import ApiClient
except ImportError:
    sys.exit("validate_manifests.py: needs Debian's python3-kubernetes (./scripts/container-deps.sh installs it)")

PRIMITIVE = {"str": str, "int": int, "bool": bool, "float": (int, float)}


def check(value, typ, path, errors):
    """Appends to `errors` what in `value` does not fit the client type name `typ`."""
    if typ == "object":  # IntOrString, free-form (RawExtension, ...)
        return
    if typ in PRIMITIVE:
        if not isinstance(value, PRIMITIVE[typ]) or (typ == "int" and isinstance(value, bool)):
            errors.append("%s: expected %s, got %r" % (path, typ, value))
        return
    if typ == "datetime":
        return
    m = re.fullmatch(r"list\[(.+)\]", typ)
    if m:
        if not isinstance(value, list):
            errors.append("%s: expected a list, got %r" % (path, value))
            return
        for i, v in enumerate(value):
            check(v, m.group(1), "%s[%d]" % (path, i), errors)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", typ)
    if m:
        if not isinstance(value, dict):
            errors.append("%s: expected a map, got %r" % (path, value))
            return
        for k, v in value.items():
            check(v, m.group(1), "%s.%s" % (path, k), errors)
        return
    model = getattr(k8s, typ, None)
    if model is None:
        errors.append("%s: unknown type %s" % (path, typ))
        return
    if not isinstance(value, dict):
        errors.append("%s: expected a %s object, got %r" % (path, typ, value))
        return
    by_json = {j: a for a, j in model.attribute_map.items()}
    for key, v in value.items():
        if key not in by_json:
            errors.append("%s: %s has no field '%s'" % (path, typ, key))
            continue
        check(v, model.openapi_types[by_json[key]], "%s.%s" % (path, key), errors)


def required_fields(obj, typ, path, errors):
    """The client's constructors refuse objects without the API's required fields."""
    try:
        ApiClient()._ApiClient__deserialize(obj, typ)
    except (ValueError, TypeError) as e:
        errors.append("%s: %s" % (path, e))


def validate(doc, where):
    kind, api = doc.get("kind"), doc.get("apiVersion", "")
    name = "%s %s/%s" % (where, kind, (doc.get("metadata") or {}).get("name"))
    errors = []
    if api in ("v1", "apps/v1"):
        typ = "V1" + kind
        if getattr(k8s, typ, None) is None:
            return name, ["no type %s in the client" % typ]
        check(doc, typ, kind, errors)
        if not errors:
            required_fields(doc, typ, kind, errors)
        return name, errors
    if api.startswith("serving.kserve.io/") and kind in ("ServingRuntime", "ClusterServingRuntime"):
        for i, c in enumerate((doc.get("spec") or {}).get("containers") or []):
            check(c, "V1Container", "spec.containers[%d]" % i, errors)
            if not errors:
                required_fields(c, "V1Container", "spec.containers[%d]" % i, errors)
        if not (doc.get("spec") or {}).get("supportedModelFormats"):
            errors.append("spec.supportedModelFormats: missing")
        return name + " (custom resource: containers checked as core/v1 Containers)", errors
    return name, ["no schema for apiVersion %s kind %s" % (api, kind)]


def main(argv):
    root = os.path.dirname(os.path.abspath(__file__))
    files = argv or sorted(glob.glob(os.path.join(root, "k8s", "*.yaml")) +
                           glob.glob(os.path.join(root, "kserve", "*.yaml")))
    bad = 0
    for path in files:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for d in docs:
            name, errors = validate(d, os.path.relpath(path))
            print("%s %s" % ("ok  " if not errors else "FAIL", name))
            for e in errors:
                print("       " + e)
            bad += bool(errors)
    print("%d object(s) wrong" % bad if bad else "every object fits its type")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
