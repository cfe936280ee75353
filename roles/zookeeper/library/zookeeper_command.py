#!/usr/bin/python
"""Ansible module: send a ZooKeeper four-letter-word command and return the answer."""

from __future__ import annotations

DOCUMENTATION = r"""
module: zookeeper_command
short_description: Ask a ZooKeeper server a four-letter-word command (ruok, mntr, srvr, ...)
options:
  host: {description: Server address., type: str, required: true}
  port: {description: Client port., type: int, default: 2181}
  command: {description: A four-letter word whitelisted on the server., type: str, required: true}
  timeout: {description: Socket timeout in seconds., type: float, default: 5}
"""

RETURN = r"""
output: {description: The raw answer., type: str}
metrics: {description: "For mntr, the key/value lines as a dict.", type: dict}
"""

import socket

from ansible.module_utils.basic import AnsibleModule


def ask(host: str, port: int, command: str, timeout: float) -> str:
    with socket.create_connection((host, port), timeout=timeout) as connection:
        connection.sendall(command.encode())
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "port": {"type": "int", "default": 2181},
            "command": {"type": "str", "required": True},
            "timeout": {"type": "float", "default": 5},
        },
        supports_check_mode=True,
    )
    p = module.params
    if len(p["command"]) != 4:
        module.fail_json(msg=f"'{p['command']}' is not a four-letter word")
    try:
        output = ask(p["host"], p["port"], p["command"], p["timeout"])
    except OSError as error:
        module.fail_json(msg=f"{p['host']}:{p['port']} did not answer '{p['command']}': {error}")
    if "is not executed because it is not in the whitelist" in output:
        module.fail_json(msg=output.strip(), output=output)
    metrics = dict(line.split("\t", 1) for line in output.splitlines() if "\t" in line)
    # mntr answers several hundred lines: return them parsed only.
    module.exit_json(changed=False, output="" if metrics else output, metrics=metrics)


if __name__ == "__main__":
    main()
