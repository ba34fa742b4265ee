"""The engine: one request through the stages (pipeline.run), whichever mode asked.

    pipeline     plan -> canvas -> mask -> denoise -> repair -> recall -> decode -> edits
    canvas       the file as token ids, each span a run of masked positions (span_length: lengths
                 scored for models with no <null> token)
    sampler      the denoising loop (unmasking: the rules; prediction: the forward passes, cached;
                 expansion: spans that grow and shrink, DreamOn)
    repair/      syntax retries, token edits, fresh fills (problems: what is broken)
    recall       a one-line fill may take a line the file already has
    decode       a filled canvas back to text
    kept_context a document's keys and values kept across requests (the language server's)
    authors/     each published family's own loop (`--protocol authors`), nothing of this engine's

The modes (infill.modes) say what a request plans and what it returns; the models
(infill.models) are behind the `Denoiser` interface.
"""
