from spectui.cli import main

raise SystemExit(main())
