from spectui.cli.main import main

raise SystemExit(main())
