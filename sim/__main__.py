from mlfc.sim.cli import main

raise SystemExit(main())
