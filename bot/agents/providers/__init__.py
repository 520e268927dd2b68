"""The built-in agents, one module each; the module registers its class under the agent's name
(``bot.agents.catalog.register``). ``anthropic`` and ``openai`` call a model, ``offline`` searches the
tunables of the seed kernels, ``replay`` answers from a call log, ``composite`` asks several in order."""
