"""`--protocol authors`: each family fills a hole token for token as its authors' code does.

The oracles below are the published loops (Dream's `diffusion_generate` `_sample`, DreamOn's
`batch_generate_with_expand_as_token`, LLaDA's `generate`, Open-dLLM's `_mdm_sample` with p2),
written here from their published algorithm, greedy, with no engine code: the network is
transformers' own Qwen2 / Llama class on the checkpoint's weights (attention made
bidirectional), the prompt is built with transformers' tokenizer. Tiny random models predict
almost uniformly, so their decisions would sit on near-ties; the checkpoints' output layers are
scaled up (`head_scale`) and every oracle decision is checked to have a clear margin.
"""

from __future__ import annotations

import json

import pytest
import pytest_lsp
import torch
from checkpoints import llada_name, llama_model, qwen2_model, write_checkpoint
from lsp_support import SERVER, initialize_params, list_actions, open_document
from lsprotocol import types
from pytest_lsp import LanguageClient
from safetensors.torch import load_file

from infill.cli import EXIT_INPUT, EXIT_OK, main

SOURCE = """def mean(values):
    total = 0
    for value in values:
        total += value
    return total / len(values)


class Stack:
    def push(self, item):
        self.items.append(item)
"""
HOLES = {  # name -> (start, end) character offsets of the hole in SOURCE
    "start of file": (0, 3),  # "def"
    "mid-line": (SOURCE.index("total / len"), SOURCE.index("total / len") + len("total / len")),
    "inside a function": (SOURCE.index("    total = 0\n"), SOURCE.index("    for value")),
}
FAMILIES = ("Dream", "DreamOn", "LLaDA", "Open-dCoder")
HEAD_SCALE = 20.0
SEEDS = (1, 2, 3, 8, 5, 6, 4, 7)  # tried in this order until a model's decisions are all clear
ORDERS = {"Dream": ("entropy", "maskgit_plus", "topk_margin"), "DreamOn": ("entropy",),
          "LLaDA": ("low_confidence",), "Open-dCoder": ("p2",)}  # fmt: skip
BUDGET = 6
STEPS = {"Dream": BUDGET, "LLaDA": BUDGET, "Open-dCoder": 4}
MARGIN = 1e-4  # every oracle decision leads its runner-up by at least this (probability or score);
#   the engine's network and transformers' agree far closer than that here (equal logits in float32)
BEGIN = {"Dream": 151665, "DreamOn": 151665, "LLaDA": 126080, "Open-dCoder": None}
MASK = {"Dream": 151666, "DreamOn": 151666, "LLaDA": 126336, "Open-dCoder": 151665}
EOS, EXPAND = 151643, 151667  # DreamOn's end-of-text and <|expand|>


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Each model as the first seed whose every oracle decision, on every hole and order the
    tests run, leads its runner-up by MARGIN (the tiny tokenizer is trained on project files, so
    which seed that is may change with them)."""
    root = tmp_path_factory.mktemp("authors")
    # DreamOn-grows writes <|expand|> and end-of-text at masked positions, about as likely as its
    # best other tokens: its holes grow to the budget, then shrink.
    models = {**{family: (family, {}) for family in FAMILIES},
              "DreamOn-grows": ("DreamOn", {"prone": {EXPAND: 1.5, EOS: 1.4}})}  # fmt: skip
    found = {}
    for model, (family, extra) in models.items():
        for seed in SEEDS:
            folder = root / f"{model}-{seed}"
            write_checkpoint(folder, family, seed=seed, head_scale=HEAD_SCALE, **extra)
            ref = Reference(folder, family)
            grows = True  # DreamOn-grows: every hole commits <|expand|> and end-of-text
            for hole in HOLES:
                for order in ORDERS[family]:
                    committed = run_oracle(ref, family, order, hole)[0]
                    grows &= model != "DreamOn-grows" or ([EXPAND] in committed and [EOS] in committed)
            if min(ref.margins) > MARGIN and grows:
                found[model] = folder
                break
        else:
            raise AssertionError(f"no seed of {SEEDS} gives {model} clear decisions: change HEAD_SCALE")
    return found


@pytest.fixture(scope="module")
def dream_folder(tmp_path_factory):
    """One Dream checkpoint, no seed search: for tests that count steps or expect a refusal, not
    ids that must match an oracle's (`folders` takes half a minute to choose its seeds)."""
    folder = tmp_path_factory.mktemp("authors-dream")
    write_checkpoint(folder, "Dream", head_scale=HEAD_SCALE)
    return folder


def run_oracle(ref: Reference, family: str, order: str, hole: str):
    """The family's oracle on a hole (BUDGET masks; DreamOn: 4 growing to 10): the ids each step
    committed, the final canvas and where the hole starts (DreamOn: and its final length)."""
    if family == "DreamOn":
        prompt, prefix_length = framed(ref, family, HOLES[hole], 4)
        committed, x, length = dreamon_oracle(ref, prompt, steps=24, min_gen=4, max_gen=10)
        return committed, x, prefix_length, length
    ids, prefix_length = framed(ref, family, HOLES[hole], BUDGET)
    x = torch.tensor([ids])
    if family == "Dream":
        committed = dream_oracle(ref, x, STEPS[family], order)
    elif family == "LLaDA":
        committed = llada_oracle(ref, x, prefix_length, BUDGET, STEPS[family], block_length=3)
    else:
        committed = p2_oracle(ref, x, STEPS[family])
    return committed, x, prefix_length, BUDGET


class Reference:
    """transformers' own network and tokenizer for a checkpoint folder."""

    def __init__(self, folder, family: str):
        state = {}
        for shard in sorted(folder.glob("*.safetensors")):
            state.update({k: v.float() for k, v in load_file(str(shard)).items()})
        if family == "LLaDA":
            from transformers import PreTrainedTokenizerFast

            self.model = llama_model(126464)
            state = {name: state[llada_name(name)] for name in self.model.state_dict()}
            self.tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
        else:
            from transformers import Qwen2Tokenizer

            self.model = qwen2_model(
                151936 if family == "Open-dCoder" else 152064, tied=family == "Open-dCoder"
            )
            self.tokenizer = Qwen2Tokenizer(
                vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt")
            )
        self.model.load_state_dict(state, strict=False)
        self.model = self.model.float().eval()
        self.family = family
        self.margins: list[float] = []

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The network's logits, shifted as the family's loop shifts them (LLaDA: not)."""
        open_mask = torch.zeros(x.shape[0], 1, x.shape[1], x.shape[1])
        with torch.no_grad():
            logits = self.model(input_ids=x, attention_mask=open_mask).logits
        if self.family == "LLaDA":
            return logits
        return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)

    def note(self, probs: torch.Tensor, scores: torch.Tensor, count: int) -> None:
        """Record how clearly the decisions were made: each token's lead over its runner-up, and
        the lead of the last position committed over the first left masked."""
        top = probs.topk(2, dim=-1).values
        self.margins += (top[:, 0] - top[:, 1]).tolist()
        if 0 < count < len(scores):
            ranked = scores.sort(descending=True).values
            self.margins.append(float(ranked[count - 1] - ranked[count]))


# ----------------------------------------------------------------------------- the oracles


def dream_oracle(ref: Reference, x: torch.Tensor, steps: int, alg: str) -> list[list[int]]:
    """DreamLM's `_sample` (diffusion_generate), greedy; -> the ids each step committed."""
    mask_id, committed = MASK[ref.family], []
    timesteps = torch.linspace(1, 1e-3, steps + 1)
    for i in range(steps):
        mask_index = x == mask_id
        logits = ref.logits(x)
        mask_logits = logits[mask_index]
        t, s = timesteps[i], timesteps[i + 1]
        probs = torch.softmax(mask_logits, dim=-1)
        confidence, x0 = probs.max(dim=-1)
        if alg == "topk_margin":
            ordered = probs.sort(dim=-1, descending=True).values
            confidence = ordered[:, 0] - ordered[:, 1]
        elif alg == "entropy":
            confidence = torch.sum(probs * torch.log(probs + 1e-10), dim=-1)
        num_mask_token = mask_index.sum() / mask_index.shape[0]
        number = int(num_mask_token * (1 - s / t)) if i < steps - 1 else int(num_mask_token)
        ref.note(probs, confidence, number)
        full_confidence = torch.full_like(x, -torch.inf, dtype=logits.dtype)
        full_confidence[mask_index] = confidence
        x_ = torch.zeros_like(x) + mask_id
        x_[mask_index] = x0.clone()
        if number > 0:
            _, transfer_index = torch.topk(full_confidence, number)
            x[0, transfer_index[0]] = x_[0, transfer_index[0]]
        committed.append(x_[0, transfer_index[0]].tolist() if number > 0 else [])
    return committed


def dreamon_oracle(ref: Reference, prompt: list[int], steps: int, min_gen: int, max_gen: int):
    """DreamOn's `batch_generate_with_expand_as_token`, greedy, entropy; -> (committed, hole)."""
    mask_id, committed = MASK["DreamOn"], []
    input_ids = torch.tensor([prompt])
    max_tokens = min(2048, input_ids.shape[1] + max_gen - min_gen)
    x = torch.nn.functional.pad(input_ids, (0, max_tokens - input_ids.shape[1]), value=mask_id)
    num_generation_tokens, expand_budget = min_gen, max_gen
    for _ in range(steps):
        window = input_ids.shape[1] - min_gen + num_generation_tokens
        attention = torch.zeros(1, max_tokens, dtype=torch.bool)
        attention[:, :window] = True
        mask_index = (x == mask_id) & attention
        if torch.all(~mask_index[:, :window]):
            break
        logits = ref.logits(x[:, :window])  # what its window-restricted attention computes
        logits = logits[mask_index[:, :window]]
        if window == max_tokens or expand_budget == 0:
            logits[:, EXPAND] -= 1e9
        probs = torch.softmax(logits, dim=-1)
        _, x0 = probs.max(dim=-1)
        confidence = torch.sum(probs * torch.log(probs + 1e-10), dim=-1)
        ref.note(probs, confidence, 1)
        transfer_index = torch.topk(confidence, 1).indices
        x0_ = torch.zeros_like(x0) + mask_id
        x0_[transfer_index] = x0[transfer_index]
        x[mask_index] = x0_
        committed.append([int(x0[transfer_index])])
        eos_indices = (x[0] == EOS).nonzero(as_tuple=True)[0]
        if len(eos_indices) > 0:
            position_mask = torch.arange(x.shape[1]) >= eos_indices[0]
            x[0][position_mask & mask_index[0]] = EOS
        for idx in sorted((x[0] == EXPAND).nonzero().flatten().tolist(), reverse=True):
            x = torch.cat((x[:, :idx], torch.tensor([[mask_id, mask_id]]), x[:, idx + 1 :]), dim=1)
            num_generation_tokens += 1
            expand_budget -= 1
            x = x[:, :max_tokens]
        for idx in sorted(((x[0] == EOS) & mask_index[0]).nonzero().flatten().tolist(), reverse=True):
            x = torch.cat((x[:, :idx], x[:, idx + 1 :], torch.tensor([[mask_id]])), dim=1)
            num_generation_tokens -= 1
    return committed, x, num_generation_tokens


def llada_oracle(ref: Reference, x: torch.Tensor, prompt_length: int, gen_length: int, steps: int,
                 block_length: int) -> list[list[int]]:  # fmt: skip
    """ML-GSAI/LLaDA `generate`, greedy, low_confidence, the suffix after the hole."""
    mask_id, committed = MASK["LLaDA"], []
    num_blocks = gen_length // block_length
    steps = steps // num_blocks
    for num_block in range(num_blocks):
        start = prompt_length + num_block * block_length
        mask_num = int((x[:, start : start + block_length] == mask_id).sum())
        counts = [mask_num // steps + (1 if i < mask_num % steps else 0) for i in range(steps)]
        for i in range(steps):
            mask_index = x == mask_id
            logits = ref.logits(x)
            x0 = torch.argmax(logits, dim=-1)
            p = torch.softmax(logits, dim=-1)
            x0_p = torch.gather(p, dim=-1, index=x0.unsqueeze(-1)).squeeze(-1)
            x0_p[:, prompt_length + (num_block + 1) * block_length :] = -float("inf")
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, x0_p, -float("inf"))
            ref.note(p[mask_index], confidence[mask_index], counts[i])
            _, select_index = torch.topk(confidence[0], k=counts[i])
            x[0, select_index] = x0[0, select_index]
            committed.append(x0[0, select_index].tolist())
    return committed


def p2_oracle(ref: Reference, x: torch.Tensor, steps: int) -> list[list[int]]:
    """Open-dLLM's `_mdm_sample`, alg p2, greedy."""
    mask_id, committed = MASK["Open-dCoder"], []
    fix_mask = x != mask_id
    for i in range(steps):
        mask_index = x == mask_id
        if not mask_index.any():
            break
        logits = ref.logits(x)
        kappa_t = (i + 1) / steps
        probs = torch.softmax(logits.float(), dim=-1)
        _, x0_full = probs.max(dim=-1)
        conf_full = torch.gather(probs, -1, x0_full.unsqueeze(-1)).squeeze(-1)
        full_conf = conf_full.clone()
        full_conf[fix_mask] = float("inf")
        num_positions = (~fix_mask).sum(dim=1)
        num_to_mask = (num_positions.float() * (1.0 - kappa_t)).floor().long()
        ref.note(probs[~fix_mask], conf_full[~fix_mask], int(num_positions) - int(num_to_mask))
        sorted_idx = torch.argsort(full_conf, dim=1, descending=False)
        to_mask = torch.zeros_like(x, dtype=torch.bool)
        to_mask[0, sorted_idx[0, : int(num_to_mask)]] = True
        x[to_mask] = mask_id
        keep_unmask = mask_index & (~to_mask)
        x[keep_unmask] = x0_full[keep_unmask]
        committed.append(x0_full[keep_unmask].tolist())
    return committed


# ----------------------------------------------------------------------------- the tests


def run_cli(tmp_path, capsys, folder, hole, *flags) -> dict:
    path = tmp_path / "sample.py"
    path.write_text(SOURCE)
    start, end = hole
    spec = f"{position(start)}-{position(end)}"
    code = main([str(path), "--range", spec, "--model", str(folder), "--protocol", "authors", "--json",
                 "--threads", "1", *flags])  # fmt: skip
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    assert path.read_text() == SOURCE  # --json writes nothing
    return json.loads(out)


def position(offset: int) -> str:
    """line:column, 1-based, of a character offset of SOURCE."""
    line = SOURCE.count("\n", 0, offset) + 1
    column = offset - (SOURCE.rfind("\n", 0, offset) + 1) + 1
    return f"{line}:{column}"


def framed(ref: Reference, family: str, hole, masks: int) -> tuple[list[int], int]:
    """The authors' prompt for a hole: [begin] prefix [mask] x masks suffix ([eos] for DreamOn)."""
    start, end = hole
    begin = [] if BEGIN[family] is None else [BEGIN[family]]
    prefix = begin + ref.encode(SOURCE[:start])
    ids = prefix + [MASK[family]] * masks + ref.encode(SOURCE[end:])
    return ids + ([EOS] if family == "DreamOn" else []), len(prefix)


@pytest.mark.slow
@pytest.mark.parametrize("hole", HOLES)
@pytest.mark.parametrize("family,order", [(f, o) for f in FAMILIES if f != "DreamOn" for o in ORDERS[f]])
def test_greedy_ids_equal_the_authors_loop(family, order, hole, folders, tmp_path, capsys):
    ref = Reference(folders[family], family)
    expected, x, prefix_length, _ = run_oracle(ref, family, order, hole)
    assert min(ref.margins) > MARGIN, "a decision of the oracle sits on a near-tie"
    flags = ["--budget", str(BUDGET), "--order", order, "--steps", str(STEPS[family])]
    flags += ["--block-length", "3"] if family == "LLaDA" else []
    report = run_cli(tmp_path, capsys, folders[family], HOLES[hole], *flags)
    (span,) = report["spans"]
    assert span["tokens_by_step"] == expected
    assert span["tokens"] == [token for step in expected for token in step]
    hole_ids = x[0, prefix_length : prefix_length + BUDGET].tolist()
    answer = ref.tokenizer.decode(hole_ids, skip_special_tokens=True)
    assert span["new_text"].rstrip("\n") == answer.rstrip("\n")


@pytest.mark.slow
@pytest.mark.parametrize("hole", HOLES)
@pytest.mark.parametrize("model", ["DreamOn", "DreamOn-grows"])
def test_dreamon_grows_and_shrinks_the_hole_as_its_authors_loop(model, hole, folders, tmp_path, capsys):
    ref = Reference(folders[model], "DreamOn")
    expected, x, prefix_length, length = run_oracle(ref, "DreamOn", "entropy", hole)
    assert min(ref.margins) > MARGIN, "a decision of the oracle sits on a near-tie"
    if model == "DreamOn-grows":  # the hole grew to its budget and shrank by end-of-text
        assert [EXPAND] in expected and [EOS] in expected
    report = run_cli(tmp_path, capsys, folders[model], HOLES[hole], "--budget", "10", "--steps", "24")
    (span,) = report["spans"]
    assert span["tokens_by_step"] == expected
    answer = ref.tokenizer.decode(x[0, prefix_length : prefix_length + max(length, 0)].tolist(),
                                  skip_special_tokens=True)  # fmt: skip
    assert span["new_text"].rstrip("\n") == answer.rstrip("\n")


def test_the_schedule_commits_nothing_first_and_two_last(dream_folder, tmp_path, capsys):
    """Dream's int(masks x (1 - s/t)) with steps = N: 0 tokens at the first step, 2 at the last."""
    ref = Reference(dream_folder, "Dream")
    ids, _ = framed(ref, "Dream", HOLES["mid-line"], 8)
    counts = []
    times = torch.linspace(1, 1e-3, 9)
    masks = torch.tensor(8.0)
    for i in range(8):
        number = int(masks) if i == 7 else int(masks * (1 - times[i + 1] / times[i]))
        counts.append(number)
        masks -= number
    assert counts[0] == 0 and counts[-1] == 2 and sum(counts) == 8
    report = run_cli(tmp_path, capsys, dream_folder, HOLES["mid-line"], "--budget", "8")
    assert report["stats"]["forward_passes"] == 8
    assert [len(step) for step in report["spans"][0]["tokens_by_step"]] == counts


@pytest.mark.parametrize("flags,message", [
    ([], "needs a published model"),
    (["--fix"], "--fix"),
    (["--retries", "2"], "--retries"),
    (["--syntax-rounds", "2"], "--retries"),  # an old name: the error names the flag by its name now
    (["--commit-threshold", "0.5"], "--commit-threshold"),
    (["--order", "p2"], "no order 'p2'"),
    (["--block-length", "2"], "no blocks"),
    (["--expand-start", "2"], "does not grow holes"),
])  # fmt: skip
def test_options_the_protocol_does_not_have_are_refused(flags, message, dream_folder, tmp_path, capsys):
    path = tmp_path / "sample.py"
    path.write_text(SOURCE)
    model = [] if not flags else ["--model", str(dream_folder)]
    code = main([str(path), "--lines", "2", "--protocol", "authors", "--write", *model, *flags])
    assert code == EXIT_INPUT
    assert message in capsys.readouterr().err
    assert path.read_text() == SOURCE


def test_the_engine_protocol_refuses_a_published_order(tmp_path, capsys):
    path = tmp_path / "sample.py"
    path.write_text(SOURCE)
    assert main([str(path), "--lines", "2", "--order", "p2"]) == EXIT_INPUT
    assert "--protocol authors" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the server


@pytest_lsp.fixture(config=SERVER, scope="module")
async def authors_client(lsp_client: LanguageClient, folders):
    options = {"modelPath": str(folders["Dream"]), "device": "cpu", "dtype": "float32", "threads": 1,
               "protocol": "authors"}  # fmt: skip
    lsp_client.initialize_result = await lsp_client.initialize_session(
        initialize_params("visual-studio-code", options)
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.external
@pytest.mark.asyncio(loop_scope="module")
async def test_the_server_setting_runs_the_authors_loop(
    authors_client: LanguageClient, folders, tmp_path, capsys
):
    """The server's fill of a selection is the CLI's `--protocol authors` fill, token for token."""
    start, end = HOLES["mid-line"]
    uri = "file:///project/sample.py"
    open_document(authors_client, uri, SOURCE)
    line, column = (int(n) - 1 for n in position(start).split(":"))
    selection = (types.Position(line=line, character=column),
                 types.Position(line=line, character=column + end - start))  # fmt: skip
    [action, *_] = await list_actions(authors_client, uri, *selection)
    resolved = await authors_client.code_action_resolve_async(action)
    [document_edit] = resolved.edit.document_changes
    [edit] = document_edit.edits
    report = run_cli(tmp_path, capsys, folders["Dream"], HOLES["mid-line"])
    assert edit.new_text == report["spans"][0]["new_text"]
    errors = [m.message for m in authors_client.messages if m.type == types.MessageType.Error]
    assert errors == []
