#!/bin/bash
echo hello > /app/answer.txt
echo scratch > /app/scratch.txt
echo published > /logs/artifacts/note.txt
mkdir -p /app/bin && printf '#!/bin/bash\necho hello\n' > /app/bin/greet && chmod +x /app/bin/greet
