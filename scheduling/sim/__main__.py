from scheduling.sim.cli import main

raise SystemExit(main())
