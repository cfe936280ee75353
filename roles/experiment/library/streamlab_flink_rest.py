#!/usr/bin/python
"""Ansible module: several documents of Flink's REST API in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: streamlab_flink_rest
short_description: Read several JSON documents from Flink's REST API in one module run
description:
  - GETs each path of C(documents) from the JobManager's REST API at C(url) and returns what it
    answered, parsed. One module run instead of one builtin uri run per path (an experiment
    keeps seven of them).
  - Over HTTPS the JobManager's certificate and address are verified against C(ca_file) (the
    kit's Flink CA), as the builtin uri module does with its ca_path.
  - Fails, naming every path that did not answer with JSON and why, when any did not.
  - Runs on any host that reaches the JobManager; it only reads, so it changes nothing, and
    check mode reads as well.
options:
  url: {description: "The REST API's base URL (flink_rest_url).", type: str, required: true}
  ca_file: {description: CA certificate (PEM) to verify an HTTPS URL with., type: path}
  documents:
    description: Name -> path under C(url) (such as /jobs/<id>/checkpoints).
    type: dict
    required: true
  keep_dir:
    description:
      - A directory where the documents are to be kept. When given, C(files) lists one entry
        per document (C(dest) <keep_dir>/<name>.json, C(content) its JSON, indented) in the
        form streamlab_files takes; nothing is written by this module.
    type: path
  timeout_s: {description: Seconds to wait for each answer., type: float, default: 30}
"""

RETURN = r"""
documents: {description: "Name -> the JSON the path answered, parsed.", type: dict}
files: {description: "With keep_dir: [{dest, content}] for streamlab_files.", type: list}
"""

import http.client
import json
import ssl
import urllib.error
import urllib.request

from ansible.module_utils.basic import AnsibleModule


def read(url: str, context: ssl.SSLContext | None, timeout_s: float) -> object:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
        return json.load(answer)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "ca_file": {"type": "path"},
            "documents": {"type": "dict", "required": True},
            "keep_dir": {"type": "path"},
            "timeout_s": {"type": "float", "default": 30},
        },
        supports_check_mode=True,
    )
    p = module.params
    base = p["url"].rstrip("/")
    context = None
    if base.lower().startswith("https:"):
        context = ssl.create_default_context(cafile=p["ca_file"] or None)
    documents, problems = {}, []
    for name, path in p["documents"].items():
        url = base + str(path)
        try:
            documents[name] = read(url, context, p["timeout_s"])
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as error:
            problems.append(f"{url}: {error}")
    if problems:
        asked = len(p["documents"])
        module.fail_json(
            msg=f"The Flink JobManager did not answer {len(problems)} of {asked} requests with "
            "JSON: " + "; ".join(problems),
            documents=documents,
        )
    result = {"changed": False, "documents": documents}
    if p["keep_dir"]:
        result["files"] = [
            {
                "dest": f"{p['keep_dir'].rstrip('/')}/{name}.json",
                "content": json.dumps(document, indent=4, sort_keys=True) + "\n",
            }
            for name, document in documents.items()
        ]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
