"""Validates sfclab's Kubernetes manifests offline: Kubernetes' own kinds against the
1.35 schemas bundled in PyPI's kubernetes-validate (strict: no unknown field), the
NetworkAttachmentDefinitions against nad-schema.json beside this file, with the CNI
configuration in each (JSON text) against its definitions. Prints one line per file and
a final count; exits 1 on the first file with a problem."""

import json
import os
import sys

import jsonschema
import kubernetes_validate
import yaml

KUBERNETES = "1.35.0"

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "nad-schema.json")) as f:
    nad_schema = json.load(f)
cni_schema = dict(nad_schema["$defs"]["cni"])


def check(doc):
    kind = doc.get("kind")
    if kind == "NetworkAttachmentDefinition":
        jsonschema.validate(doc, nad_schema)
        jsonschema.validate(json.loads(doc["spec"]["config"]), cni_schema)
    else:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    return "%s/%s" % (kind, doc["metadata"]["name"])


failed = 0
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        names = [check(d) for d in docs]
        print("ok   %s: %s" % (path, ", ".join(names)))
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        print("FAIL %s: at %s: %s" % (path, where or "the top", e.message))
        failed += 1
    except Exception as e:  # kubernetes-validate's own errors say what and where
        print("FAIL %s: %s" % (path, str(e).splitlines()[0]))
        failed += 1
if failed:
    sys.exit(1)
print("%d files valid" % len(sys.argv[1:]))
