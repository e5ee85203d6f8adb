"""The MLTCP experiments: kernel TCP (``kernel``, ``kernel_net``), unmodified PyTorch DDP over gloo (``gloo``,
``gloo_ddp``, ``gloo_rows``; the one-job check ``kernel_gloo``), the emulated network's F sweep (``sweep``), real
training jobs (``real``), a recorded run's shift (``shift``); their published rows (``rows``), the regime curve
every platform's rows feed (``regime``) and the docs' MLTCP table and plot (``figures``)."""
