"""What the core split (issue 41 §4) left for later: params (config, chat_params, yaml_file),
atomic writes, the judge record, metrics files, the model name and the statistics, edited on other
branches when it was made, then moved to params/, io/, artifacts/ and statistics/."""
