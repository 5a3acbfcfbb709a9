"""The smallest agent program: the env's chat to the model, the model's reply as the answer.

    boltzoo eval math-v0 --episodes 20 --agent-command "python examples/agent_programs/solver.py"
    boltzoo train math-v0 --lora-r 16 --agent-command "python examples/agent_programs/solver.py" ...

It uses the OpenAI SDK and nothing of boltzoo: the SDK reads OPENAI_BASE_URL and OPENAI_API_KEY
from the environment (the gateway session of this turn), BOLTZOO_TASK holds the turn's
observation and BOLTZOO_MODEL the model to ask for. What it prints is the action. Its call is
recorded with its token ids at the gateway: what LightningRL learns from. (math-v0's env runs
the calculator from the text, <calc>...</calc>, so the model's reply is the action as it is.)
"""

import json
import os

from openai import OpenAI

task = json.loads(os.environ["BOLTZOO_TASK"])
reply = OpenAI().chat.completions.create(
    model=os.environ["BOLTZOO_MODEL"], messages=task["messages"]
)
print(reply.choices[0].message.content)
