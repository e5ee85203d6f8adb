from mlfc.lab.deploy.run import main

raise SystemExit(main())
