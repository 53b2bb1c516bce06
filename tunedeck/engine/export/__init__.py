"""Exporting a trained model: a pinned adapter, a merged model, a bundle with its model card, or an MLX model.

`exporter.export_model` is the entry point (also `python -m tunedeck.engine.export --spec FILE`);
`source` finds the model folder and run documents, `model_files` copies what an adapter or a
full model needs, `merge` merges an adapter into its base, `card` writes the model card,
`bundle` packs the archive, `secrets_check` refuses text artifacts that hold a secret,
`mlx_target` checks that mlx-lm can open an MLX export (and that it fits the Mac),
`mlx_convert` writes it with mlx-lm's converter.
"""
