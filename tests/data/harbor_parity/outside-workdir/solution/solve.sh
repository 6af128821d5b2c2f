#!/bin/bash
# As many tasks' solutions do: install something outside the working directory.
printf '#!/bin/sh\necho hello\n' > /usr/local/bin/greet
chmod +x /usr/local/bin/greet
